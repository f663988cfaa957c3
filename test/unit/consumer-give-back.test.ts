/**
 * Deliveries given back because the database refused them (or could not be reached) keep their
 * place: nothing delivered after them on their channel is applied before they come back. Over
 * the in-memory broker, frame by frame: the consumer closes the channel that holds them (the
 * broker puts everything it held back at the head of the queue, in order) and consumes again on
 * a new channel. test/integration/give-back-order.test.ts shows why not a nack, on the real broker.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { StoreUnavailableError } from "../../src/core/errors.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { brokerClosedChannels, fakeBrokerPerTest, givenBackChannels, until } from "../support/fake-consumer.js";
import { MemoryStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const event = (eventId: string) => ({ tenant: "t1", event_id: eventId });

/** A store that refuses its first `refusals` transactions as a read-only database would. */
function refusingStore(refusals: number): MemoryStore {
  const store = new MemoryStore();
  store.script = (attempt) => {
    if (attempt <= refusals) throw new StoreUnavailableError("read-only", "PostgreSQL 10.0.0.1:5441 refuses work (read-only, 25006): cannot execute INSERT in a read-only transaction", { node: "10.0.0.1:5441" });
    return "commit";
  };
  return store;
}

describe("a batch the database refused goes back with everything behind it on its channel", () => {
  it("applies every event once and in the order published, even when the database accepts the next batch", async () => {
    // The first batch's two attempts are refused; every later transaction would commit.
    const store = refusingStore(2);
    const { consumer } = env.build({ store, batchSize: 2, prefetch: 20 });
    await consumer.start();
    const ids = Array.from({ length: 8 }, (_, i) => `e-${i + 1}`);
    for (const id of ids) broker.publishJson("work", event(id));
    await until(() => store.effects.length === ids.length && broker.depth("work").unacked === 0, "every event applied and acked");

    expect(store.effects).toEqual(ids);
    expect(consumer.outcomeCounts).toMatchObject({ applied: 8, duplicate: 0, quarantined: 0, delayed: 0 });
    expect(consumer.outcomeCounts.requeue).toBe(2);
    // The consuming channel closed by the consumer (the broker puts back what it held, in
    // order), then the queue consumed again on a new channel; never a nack (a quorum queue puts
    // a nacked message at the back of the queue).
    const [first, second] = broker.framesOf("consume");
    expect(givenBackChannels(broker).map((c) => c.channel)).toEqual([first!.channel]);
    expect(second!.channel).not.toBe(first!.channel);
    expect(broker.framesOf("consume")).toHaveLength(2);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(broker.framesOf("cancel")).toEqual([]);
    expect(broker.framesOf("publish")).toEqual([]);
    expect(brokerClosedChannels(broker)).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 0, unacked: 0 });
  });

  it("health() says the database refuses work, on which node and why, while it does; the store tracks it, the consumer shows it", async () => {
    const store = refusingStore(Number.MAX_SAFE_INTEGER);
    const health = { available: false, node: "10.0.0.1:5441", problem: { since: new Date(0), code: "RI_STORE_UNAVAILABLE", reason: "read-only", message: "refuses" } };
    store.databaseHealth = () => health;
    const { consumer } = env.build({ store, batchSize: 2 });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.requeue >= 1, "the delivery given back");
    expect(consumer.health().database).toBe(health);
    expect(consumer.outcomeCounts).toMatchObject({ applied: 0, quarantined: 0, delayed: 0 });
  });

  it("when consuming again fails, loses the session and consumes on a new connection: nothing lost, nothing out of order", async () => {
    const store = refusingStore(2);
    const { consumer, lines } = env.build({ store, batchSize: 2, prefetch: 20, reconnectBaseDelayMs: 10 });
    await consumer.start();
    // The next channel opened is the give-back's new consuming channel.
    broker.failNext.channel = "504 CHANNEL_ERROR - second channel open refused (test)";
    const ids = Array.from({ length: 6 }, (_, i) => `e-${i + 1}`);
    for (const id of ids) broker.publishJson("work", event(id));
    await until(() => store.effects.length === ids.length && broker.depth("work").unacked === 0, "every event applied and acked");

    expect(store.effects).toEqual(ids);
    expect(lines.filter((l) => l.message === "could not consume again after giving deliveries back; reconnecting").map((l) => l.fields.error)).toEqual([expect.stringContaining("second channel open refused")]);
    expect(broker.connections.length).toBeGreaterThanOrEqual(2);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(consumer.outcomeCounts).toMatchObject({ applied: 6, duplicate: 0, quarantined: 0, delayed: 0 });
  });

  it("while stopping, gives them back at once by closing the channel, and consumes nothing again", async () => {
    const store = refusingStore(Number.MAX_SAFE_INTEGER);
    // A running consumer would wait a minute before giving them back; a stopping one does not.
    const { consumer } = env.build({ store, batchSize: 3, requeueDelayMs: 60_000, retry: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 100 } });
    await consumer.start();
    for (const id of ["e-1", "e-2", "e-3"]) broker.publishJson("work", event(id));
    await until(() => store.transactions >= 1, "the first refused attempt");
    const stopping = Date.now();
    await consumer.stop();

    expect(Date.now() - stopping).toBeLessThan(5_000);
    expect(consumer.outcomeCounts).toMatchObject({ applied: 0, requeue: 3 });
    expect(givenBackChannels(broker)).toHaveLength(1);
    expect(broker.framesOf("consume")).toHaveLength(1);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 3, unacked: 0 });
  });
});
