/**
 * `consumer.health()` over the in-memory broker, as a readiness probe reads it: connected,
 * node, consuming and state through start, a lost connection, the recovery and stop; and
 * `lastCommitAt`, which moves only when a batch committed something (applied, duplicate or
 * quarantined), never for deliveries given back.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { FakeBroker } from "../support/fake-amqp.js";
import { fakeBrokerPerTest, heldHandler, settleTurns, until, givenBackChannels } from "../support/fake-consumer.js";
import { logged } from "../support/recording-logger.js";
import { unreachableStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const event = (eventId: string) => ({ tenant: "t1", event_id: eventId });
const noOutcomes = { applied: 0, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 };

describe("consumer.health()", () => {
  it("follows the consumer: idle, consuming, a lost connection, the recovery, stopped", async () => {
    const { consumer, lines } = env.build({ reconnectBaseDelayMs: 150, reconnectMaxDelayMs: 150 });
    expect(consumer.health()).toEqual({ state: "idle", connected: false, node: null, consuming: false, lastCommitAt: null, outcomes: noOutcomes });
    await consumer.start();
    expect(consumer.health()).toEqual({ state: "running", connected: true, node: "node-a:5672", consuming: true, lastCommitAt: null, outcomes: noOutcomes });

    broker.dropConnection(broker.connections[0]!);
    await until(() => logged(lines, "AMQP session lost; reconnecting").length === 1, "the loss");
    expect(consumer.health()).toMatchObject({ state: "running", connected: false, node: null, consuming: false });
    await until(() => logged(lines, "AMQP session restored").length === 1, "the recovery");
    await until(() => consumer.health().consuming, "consuming again");
    expect(consumer.health()).toMatchObject({ state: "running", connected: true, node: "node-a:5672" });

    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.applied === 1, "the apply");
    // A copy: what a probe holds does not change under it.
    const seen = consumer.health();
    expect(seen.outcomes).toEqual({ ...noOutcomes, applied: 1 });
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.duplicate === 1, "the duplicate");
    expect(seen.outcomes).toEqual({ ...noOutcomes, applied: 1 });
    expect(consumer.health().outcomes).toEqual({ ...noOutcomes, applied: 1, duplicate: 1 });

    await consumer.stop();
    expect(consumer.health()).toMatchObject({ state: "stopped", consuming: false });
  });

  it("is not consuming while it stops, although still connected and subscribed until its batch settles", async () => {
    const held = heldHandler();
    const { consumer } = env.build({ handler: held.handler });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => held.entered, "the batch under way");
    const stopped = consumer.stop();
    try {
      expect(consumer.health()).toMatchObject({ state: "stopping", connected: true, consuming: false });
    } finally {
      held.release();
      await stopped;
    }
    expect(consumer.health()).toMatchObject({ state: "stopped", consuming: false, outcomes: { ...noOutcomes, applied: 1 } });
  });

  it("lastCommitAt moves when a batch commits (applied, duplicate, quarantined), never for deliveries given back", async () => {
    const db = unreachableStore("connection refused");
    const { store } = db;
    const { consumer } = env.build({ store });
    await consumer.start();
    const nacks = () => givenBackChannels(broker).length;

    broker.publishJson("work", event("e-1"));
    await until(() => nacks() >= 2, "the delivery given back twice");
    expect(consumer.health().lastCommitAt).toBeNull();
    expect(consumer.health().outcomes.requeue).toBeGreaterThanOrEqual(2);

    db.down = false;
    await until(() => consumer.outcomeCounts.applied === 1, "the apply");
    const applied = consumer.health().lastCommitAt;
    expect(applied).toBeInstanceOf(Date);

    db.down = true;
    const before = nacks();
    broker.publishJson("work", event("e-2"));
    await until(() => nacks() > before, "e-2 given back");
    expect(consumer.health().lastCommitAt).toBe(applied);

    db.down = false;
    await until(() => consumer.outcomeCounts.applied === 2, "e-2 applied");
    const second = consumer.health().lastCommitAt!;
    expect(second).not.toBe(applied);

    await settleTurns(5);
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.duplicate === 1, "the duplicate");
    const duplicate = consumer.health().lastCommitAt!;
    expect(duplicate.getTime()).toBeGreaterThan(second.getTime());

    await settleTurns(5);
    broker.publish("", "work", "{broken", { contentType: "application/json" });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine");
    expect(consumer.health().lastCommitAt!.getTime()).toBeGreaterThan(duplicate.getTime());
  });
});
