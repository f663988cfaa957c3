/**
 * A batch the pipeline rejects (an InboxConfigError: the handler or the store cannot work as
 * configured) stops the consumer, over an in-memory broker: the error is logged at error level
 * with the handler and the queue, nothing of that batch is acked, nacked or quarantined (closing
 * the channel gives its deliveries back to the queue), no later delivery is processed, no
 * reconnect follows, and whenStopped() rejects with that very error.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { InboxConfigError, InboxError } from "../../src/core/errors.js";
import type { IncomingMessage } from "../../src/core/pipeline.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { Outcome } from "../../src/core/outcome.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { NODE_A, ackFrames, brokerClosedChannels, type fakeConsumer, fakeBrokerPerTest, settleTurns, until } from "../support/fake-consumer.js";
import { logged } from "../support/recording-logger.js";
import { MemoryStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});
afterEach(() => {
  vi.restoreAllMocks();
});

const start = (options: Parameters<typeof fakeConsumer>[1] = {}) => env.build(options);
const event = (eventId: string) => ({ tenant: "t1", event_id: eventId });
const FATAL_LOG = "the pipeline rejected a batch; the consumer stops and gives its deliveries back unsettled";

/**
 * Stands in for the pipeline: the batches for which `rejects` says so reject with `error`, the
 * others go through the real pipeline. Returns the event ids of every batch it was handed.
 */
function pipelineRejecting(error: Error, rejects: (call: number) => boolean = () => true): string[][] {
  type Process = (this: InboxPipeline<unknown, unknown>, messages: readonly IncomingMessage[]) => Promise<Outcome[]>;
  const original = Object.getOwnPropertyDescriptor(InboxPipeline.prototype, "process")!.value as Process;
  const batches: string[][] = [];
  vi.spyOn(InboxPipeline.prototype, "process").mockImplementation(function (this: InboxPipeline<unknown, unknown>, messages: readonly IncomingMessage[]): Promise<Outcome[]> {
    batches.push(messages.map((m) => (JSON.parse(m.body.toString()) as { event_id: string }).event_id));
    if (rejects(batches.length)) return Promise.reject(error);
    return original.call(this, messages);
  });
  return batches;
}

/** The publishes a consumer made to a quarantine or delay queue. */
const copies = () => broker.framesOf("publish").filter((f) => f.routingKey.endsWith(".quarantine") || f.routingKey.includes(".retry."));

describe("a batch the pipeline rejects", () => {
  it("stops the consumer with that error: nothing acked, nacked or quarantined, the deliveries back in the queue", async () => {
    const configError = new InboxConfigError("handler fake-consumer: the outbox needs a store that supports it");
    const batches = pipelineRejecting(configError);
    const { consumer, lines, store } = start({ retryDelaysMs: [1000] });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    broker.publishJson("work", event("e-2"));

    const stopped = await consumer.whenStopped().then(() => undefined, (e: unknown) => e);
    expect(stopped).toBe(configError);
    expect(batches).toEqual([["e-1", "e-2"]]);
    expect(ackFrames(broker)).toEqual([]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(copies()).toEqual([]);
    expect(store.effects).toEqual([]);
    expect(consumer.outcomeCounts).toEqual({ applied: 0, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 });
    // Closing the consuming channel gave both back, in order, for whatever runs next.
    const consume = broker.framesOf("consume")[0]!;
    expect(broker.framesOf("channel-close").some((f) => f.channel === consume.channel && f.by === "client")).toBe(true);
    expect(brokerClosedChannels(broker)).toEqual([]);
    expect(broker.openConnections).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 2, unacked: 0 });
    expect(broker.queue("work").messages.map((m) => [JSON.parse(m.content.toString()).event_id as string, m.redelivered])).toEqual([["e-1", true], ["e-2", true]]);

    const [line, ...more] = logged(lines, FATAL_LOG);
    expect(more).toEqual([]);
    expect(line).toMatchObject({
      level: "error",
      fields: { handler: "fake-consumer", queue: "work", messages: 2, code: "RI_CONFIG", error: configError.message },
    });
    expect(logged(lines, "stopped")).toHaveLength(1);
    // A stopped consumer stays stopped: no reconnect, and stop() from its owner just resolves.
    await consumer.stop();
    await settleTurns(30);
    expect(broker.connections).toHaveLength(1);
    expect(logged(lines, "AMQP session lost; reconnecting")).toEqual([]);
    expect(logged(lines, "AMQP session restored")).toEqual([]);
  });

  it("settles the batches before it, starts none after it, and stops with the first error only", async () => {
    const configError = new InboxConfigError("the store cannot hold this handler's records");
    const batches = pipelineRejecting(configError, (call) => call >= 2);
    const { consumer, lines, store } = start({ batchSize: 1 });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => ackFrames(broker).length === 1, "the first delivery's ack");
    for (const id of ["e-2", "e-3", "e-4"]) broker.publishJson("work", event(id));

    await expect(consumer.whenStopped()).rejects.toBe(configError);
    expect(store.effects).toEqual(["e-1"]);
    expect(batches).toEqual([["e-1"], ["e-2"]]);
    // Only the first delivery was acked, on its own tag: no multiple ack covered the others.
    expect(ackFrames(broker)).toEqual([expect.objectContaining({ tag: 1, multiple: false })]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(copies()).toEqual([]);
    expect(consumer.outcomeCounts.applied).toBe(1);
    expect(broker.depth("work")).toEqual({ ready: 3, unacked: 0 });
    expect(logged(lines, FATAL_LOG)).toHaveLength(1);
  });

  it("gives back a partition's deliveries too, and the replica leaves its peers", async () => {
    const configError = new InboxConfigError("handler misconfigured");
    pipelineRejecting(configError);
    const { consumer } = start({ partitions: { count: 2, heartbeatMs: 20, memberTimeoutMs: 100, memberId: "solo" } });
    await consumer.start();
    expect(consumer.heldPartitions).toEqual([0, 1]);
    broker.publishJson("work.p0", event("e-1"));

    await expect(consumer.whenStopped()).rejects.toBe(configError);
    expect(ackFrames(broker)).toEqual([]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(copies()).toEqual([]);
    expect(broker.depth("work.p0")).toEqual({ ready: 1, unacked: 0 });
    expect(consumer.heldPartitions).toEqual([]);
    expect(broker.openConnections).toEqual([]);
  });

  it("stops on any rejection of the pipeline, whatever its kind, and keeps the error as it came", async () => {
    const bug = new TypeError("Cannot read properties of undefined (reading 'tenant')");
    pipelineRejecting(bug);
    const { consumer, lines } = start();
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await expect(consumer.whenStopped()).rejects.toBe(bug);
    expect(bug).not.toBeInstanceOf(InboxError);
    expect(logged(lines, FATAL_LOG)[0]!.fields).toMatchObject({ handler: "fake-consumer", queue: "work", error: bug.message });
    expect(ackFrames(broker)).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 1, unacked: 0 });
  });
});

describe("a configuration error met by the real pipeline", () => {
  it("from the store: the consumer stops with it, and the delivery goes back untouched", async () => {
    const store = new MemoryStore();
    const configError = new InboxConfigError("handler name too long for this store");
    store.script = () => { throw configError; };
    const { consumer, lines } = start({ store, retryDelaysMs: [1000] });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await expect(consumer.whenStopped()).rejects.toBe(configError);
    expect(ackFrames(broker)).toEqual([]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(copies()).toEqual([]);
    expect(store.quarantined).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 1, unacked: 0 });
    expect(logged(lines, FATAL_LOG)[0]!.fields).toMatchObject({ handler: "fake-consumer", queue: "work", code: "RI_CONFIG" });
  });

  it("from the handler: the same", async () => {
    const configError = new InboxConfigError("handler fake-consumer: ctx.publish needs a store with an outbox");
    const { consumer, store } = start({ handler: { name: "fake-consumer", handle: () => Promise.reject(configError) } });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await expect(consumer.whenStopped()).rejects.toBe(configError);
    expect(ackFrames(broker)).toEqual([]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(copies()).toEqual([]);
    expect(store.quarantined).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 1, unacked: 0 });
  });
});

describe("whenStopped", () => {
  it("resolves after stop() when nothing went wrong", async () => {
    const { consumer } = start();
    await consumer.start();
    let settled = false;
    void consumer.whenStopped().then(() => { settled = true; });
    await settleTurns();
    expect(settled).toBe(false);
    await consumer.stop();
    await expect(consumer.whenStopped()).resolves.toBeUndefined();
  });

  it("resolves for a consumer stopped before it started, and rejects with start()'s error when start fails", async () => {
    const idle = start();
    await idle.consumer.stop();
    await expect(idle.consumer.whenStopped()).resolves.toBeUndefined();

    broker.down.add(NODE_A);
    const { consumer } = start();
    const error = await consumer.start().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    await expect(consumer.whenStopped()).rejects.toBe(error);
  });
});
