import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { OutboxSignal } from "../../src/core/store-contract/outbox-signal.js";
import type { ClaimOptions, OutboxClaim, OutboxRelayStore } from "../../src/core/store-contract/outbox-relay-store.js";
import { RelayClaims } from "../../src/outbox/relay-claims.js";

/** A store whose database always has a due row, and which hands its writes over when a relay is attached. */
function storeWithDueRows() {
  const claims: ClaimOptions[] = [];
  const outboxSignal = new OutboxSignal();
  const store = {
    outboxSignal,
    claimOutbox: (options: ClaimOptions): Promise<OutboxClaim> => {
      claims.push(options);
      return Promise.resolve({ rows: [], expiresAt: Infinity, settle: () => Promise.resolve() });
    },
    settleHandedOff: () => Promise.resolve(),
    cleanupOutbox: () => Promise.resolve(0),
  } as unknown as OutboxRelayStore;
  return { store, claims, outboxSignal };
}

function relayClaims(store: OutboxRelayStore): RelayClaims {
  return new RelayClaims({
    store, relayName: "r", batchSize: 10, leaseMs: 30_000, pollIntervalMs: 1000, handoff: true, packs: false, hook: undefined, logger: silentLogger, wake: () => undefined,
  });
}

describe("RelayClaims", () => {
  it("takes handed-over rows whether or not the database may be claimed, and asks the database only when it may", async () => {
    const { store, claims, outboxSignal } = storeWithDueRows();
    const relay = relayClaims(store);
    relay.attach();
    expect(relay.holdsHandedOff).toBe(false);
    // Nothing in memory and the database not allowed: nothing, and no query.
    expect(await relay.next(undefined, false)).toBeNull();
    expect(claims).toHaveLength(0);
    outboxSignal.handoff!.take([{ id: 1, previousUnsent: null, record: {
      messageId: "m1", exchange: "x", routingKey: "k", body: Buffer.from("{}"), properties: "{}", orderingKey: null, source: null,
    } }], Date.now());
    expect(relay.holdsHandedOff).toBe(true);
    const handedOff = await relay.next(undefined, false);
    expect(handedOff?.handedOff).toBe(true);
    expect(handedOff?.rows.map((r) => r.id)).toEqual([1]);
    expect(relay.holdsHandedOff).toBe(false);
    expect(claims).toHaveLength(0);
    // Allowed: the database is asked.
    const claimed = await relay.next(undefined, true);
    expect(claimed?.handedOff).toBeUndefined();
    expect(claims).toHaveLength(1);
  });
});
