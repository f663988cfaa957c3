/**
 * A `before-publish` hook that throws (a drill, a test): the claim it was given is ended with
 * nothing marked, so its rows stay pending (a held database claim releases its locks), nothing of
 * it reaches the broker, the failure is logged, and the relay carries on with its next claim.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { OutboxRelay } from "../../src/outbox/outbox-relay.js";
import type { OutboxClaim, OutboxRelayStore, OutboxSettlement } from "../../src/core/store-contract/outbox-relay-store.js";
import { OutboxSignal } from "../../src/core/store-contract/outbox-signal.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { NODE_A, fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { RELAY_TEST_QUEUE, declareRelayTestQueue, relayTestRow } from "../support/fake-relay.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

describe("a before-publish hook that throws", () => {
  it("ends its claim with nothing marked and publishes none of it; the next claim goes out", async () => {
    await declareRelayTestQueue(broker);
    const settlements: Array<{ claim: number; settlement: OutboxSettlement }> = [];
    let claims = 0;
    const store: OutboxRelayStore = {
      dialect: "memory", outboxSignal: new OutboxSignal(), overlappingClaims: true,
      claimOutbox(): Promise<OutboxClaim | null> {
        const claim = ++claims;
        if (claim > 2) return Promise.resolve(null);
        return Promise.resolve({ rows: [relayTestRow(claim)], expiresAt: Infinity, settle: (settlement) => { settlements.push({ claim, settlement }); return Promise.resolve(); } });
      },
      cleanupOutbox: () => Promise.resolve(0),
    };
    const lines: LogLine[] = [];
    let hooked = 0;
    const relay = new OutboxRelay({
      url: NODE_A, store, logger: recordingLogger(lines), pollIntervalMs: 10, cleanupIntervalMs: 0, listen: false,
      hook: (point) => { if (point === "before-publish" && hooked++ === 0) throw new Error("drill: stop before publishing"); },
    });
    env.stopAfter(() => relay.stop());
    await relay.start();
    await until(() => settlements.length >= 2, "both claims settled");
    expect(settlements).toEqual([
      { claim: 1, settlement: { sent: [], failed: [] } },
      { claim: 2, settlement: { sent: [2], failed: [] } },
    ]);
    expect(broker.queue(RELAY_TEST_QUEUE).messages.map((m) => String(m.properties.messageId))).toEqual(["m-2"]);
    expect(logged(lines, "outbox relay cannot claim rows; retrying").map((l) => l.fields.error)).toEqual(["drill: stop before publishing"]);
  });
});
