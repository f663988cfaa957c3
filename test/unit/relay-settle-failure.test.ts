/**
 * A relay round that fails as it is settled (here its failure-window hook throws after the
 * confirm) while the next claim fails too (the database went away): both failures reach the
 * log. Before, only the claim's did: the pipeline dropped the round's failure while giving up
 * on the claim, and the relay's recovery settled what was left with any failure ignored.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { OutboxRelay } from "../../src/outbox/outbox-relay.js";
import type { OutboxClaim, OutboxRelayStore } from "../../src/core/store-contract/outbox-relay-store.js";
import { OutboxSignal } from "../../src/core/store-contract/outbox-signal.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { NODE_A, fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { declareRelayTestQueue, relayTestRow } from "../support/fake-relay.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

describe("a relay round that fails to settle while the next claim fails", () => {
  it("logs both failures", async () => {
    await declareRelayTestQueue(broker);
    const row = relayTestRow(1);
    let claims = 0;
    const store: OutboxRelayStore = {
      dialect: "memory", outboxSignal: new OutboxSignal(), overlappingClaims: true,
      claimOutbox(): Promise<OutboxClaim | null> {
        claims++;
        if (claims === 1) return Promise.resolve({ rows: [row], expiresAt: Infinity, settle: () => Promise.resolve() });
        if (claims === 2) return Promise.reject(new Error("database down"));
        return Promise.resolve(null);
      },
      cleanupOutbox: () => Promise.resolve(0),
    };
    const lines: LogLine[] = [];
    const relay = new OutboxRelay({
      url: NODE_A, store, logger: recordingLogger(lines), pollIntervalMs: 10, cleanupIntervalMs: 0, listen: false,
      hook: (point) => { if (point === "after-confirm") throw new Error("drill hook failed after the confirm"); },
    });
    env.stopAfter(() => relay.stop());
    await relay.start();
    await until(() => claims >= 3, "the relay claiming again after the failures");
    expect(logged(lines, "outbox relay cannot claim rows; retrying").map((l) => l.fields.error)).toEqual(["database down"]);
    const settling = lines.filter((l) => String(l.fields.error).includes("drill hook failed after the confirm"));
    expect(settling.map((l) => [l.level, l.message])).toEqual([["warn", "outbox relay round failed while it was settled; the relay carries on"]]);
  });
});
