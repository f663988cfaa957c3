/**
 * `processSpans: "batch"` (the default of a batched consumer) with a real OpenTelemetry SDK, over the in-memory broker: one process
 * span per batch, a root linked to each delivery's producer span, the transaction its child, the
 * outcomes counted on it, and each event's publishes and copies still continuing its own
 * producer's trace.
 */
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest";
import { PermanentEventError } from "../../src/core/errors.js";
import { InboxConfigError } from "../../src/core/errors.js";
import type { InboxHandler } from "../../src/core/handler.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { type TestEvent, fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { type MemoryHandle, type MemoryStore, memoryStoreWithOutbox } from "../support/memory-store.js";
import { parentSpanId, parseTraceparent, producerTraceparent, registerTracingSdk } from "../support/tracing-sdk.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const sdk = registerTracingSdk();
afterAll(() => sdk.shutdown());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
  sdk.reset();
});

const event = (eventId: string) => ({ tenant: "t1", event_id: eventId });
const outboxHeaders = (store: MemoryStore, index: number) => (JSON.parse(store.outbox![index]!.properties) as { headers: Record<string, unknown> }).headers;

/** One outbox message per event through handleBatch; events whose id starts with "never" are refused. */
const batchHandler: InboxHandler<TestEvent, MemoryHandle> = {
  name: "tracer",
  async handleBatch(items) {
    const refused = [];
    for (const [index, { event: e, ctx }] of items.entries()) {
      if (e.event_id.startsWith("never")) refused.push({ index, reason: "account_closed", detail: "closed" });
      else await ctx.publish("downstream", "event.applied", { id: e.event_id });
    }
    return refused;
  },
};

describe("process spans per batch", () => {
  it("makes one root span for the batch, linked to each producer's span; the rows continue each producer's trace", async () => {
    const store = memoryStoreWithOutbox();
    const { consumer } = env.build({ handler: batchHandler, store, batchSize: 3, prefetch: 3, processSpans: "batch" });
    const a = producerTraceparent("a");
    const b = producerTraceparent("b");
    sdk.reset();
    await consumer.start();
    broker.publishJson("work", event("e-a"), { headers: { traceparent: a.traceparent } });
    broker.publishJson("work", event("e-b"), { headers: { traceparent: b.traceparent } });
    broker.publishJson("work", event("e-c"));
    await until(() => consumer.outcomeCounts.applied === 3, "applied");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "batch span ended");

    const process = sdk.one("process work");
    const transaction = sdk.one("transaction tracer");
    expect(parentSpanId(process)).toBeUndefined();
    expect([a.traceId, b.traceId]).not.toContain(process.spanContext().traceId);
    expect(process.links.map((l) => l.context.spanId)).toEqual([a.spanId, b.spanId]);
    expect(process.links.map((l) => l.context.traceId)).toEqual([a.traceId, b.traceId]);
    expect(process.attributes).toMatchObject({
      "messaging.system": "rabbitmq", "messaging.operation.type": "process", "messaging.destination.name": "work",
      "messaging.batch.message_count": 3, "rabbit_inbox.handler": "tracer", "rabbit_inbox.outcome_count.applied": 3,
    });
    // No span of its own per message, and the transaction is the batch span's child.
    expect(sdk.spans().map((s) => s.name).sort()).toEqual(["process work", "transaction tracer"]);
    expect(parentSpanId(transaction)).toBe(process.spanContext().spanId);
    expect(transaction.links).toEqual([]);

    // a's and b's rows continue their producers' traces; c brought none and continues the batch's.
    const rows = [0, 1, 2].map((i) => parseTraceparent(outboxHeaders(store, i).traceparent));
    expect(rows[0]).toEqual({ traceId: a.traceId, spanId: a.spanId });
    expect(rows[1]).toEqual({ traceId: b.traceId, spanId: b.spanId });
    expect(rows[2]).toEqual({ traceId: process.spanContext().traceId, spanId: transaction.spanContext().spanId });
  });

  it("counts a quarantined event on the batch span with an event, and its copy continues its producer's trace", async () => {
    const { consumer } = env.build({ handler: batchHandler, store: memoryStoreWithOutbox(), batchSize: 2, prefetch: 2, processSpans: "batch" });
    const a = producerTraceparent("a");
    sdk.reset();
    await consumer.start();
    broker.publishJson("work", event("never-a"), { headers: { traceparent: a.traceparent } });
    broker.publishJson("work", event("e-b"));
    await until(() => consumer.outcomeCounts.quarantined === 1 && consumer.outcomeCounts.applied === 1, "settled");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "batch span ended");

    const process = sdk.one("process work");
    expect(process.attributes).toMatchObject({ "rabbit_inbox.outcome_count.applied": 1, "rabbit_inbox.outcome_count.quarantined": 1 });
    expect(process.events.map((e) => [e.name, e.attributes?.["rabbit_inbox.event_id"], e.attributes?.["rabbit_inbox.quarantine.reason"]]))
      .toEqual([["quarantined", "never-a", "account_closed"]]);
    const publish = sdk.one("publish amq.default");
    expect(publish.spanContext().traceId).toBe(a.traceId);
    expect(parentSpanId(publish)).toBe(a.spanId);
    const [copy] = broker.framesOf("publish").filter((f) => f.routingKey === "work.quarantine");
    const headers = copy!.properties.headers as Record<string, unknown>;
    expect(parseTraceparent(headers.traceparent)).toEqual({ traceId: a.traceId, spanId: publish.spanContext().spanId });
  });

  it("links a producer that sampled its trace out, and its row carries that decision on", async () => {
    const store = memoryStoreWithOutbox();
    const { consumer } = env.build({ handler: batchHandler, store, processSpans: "batch" });
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent } });
    await until(() => consumer.outcomeCounts.applied === 1, "applied");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "batch span ended");
    expect(sdk.one("process work").links.map((l) => [l.context.spanId, l.context.traceFlags])).toEqual([["00f067aa0ba902b7", 0]]);
    expect(outboxHeaders(store, 0).traceparent).toBe(traceparent);
  });

  it("is the default of a batched consumer; strict mode (batches of one) makes a span per message", async () => {
    const batched = env.build({ handler: batchHandler, store: memoryStoreWithOutbox() });
    await batched.consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: producerTraceparent("a").traceparent } });
    await until(() => sdk.spans().some((s) => s.name === "process work"), "the batched consumer's span");
    expect(sdk.one("process work").attributes["messaging.batch.message_count"]).toBe(1);
    expect(parentSpanId(sdk.one("process work"))).toBeUndefined();
    await batched.consumer.stop();

    sdk.reset();
    const strict = env.build({ handler: batchHandler, store: memoryStoreWithOutbox(), batchSize: 1 });
    await strict.consumer.start();
    const b = producerTraceparent("b");
    sdk.reset();
    broker.publishJson("work", event("e-2"), { headers: { traceparent: b.traceparent } });
    await until(() => sdk.spans().some((s) => s.name === "process work"), "the strict consumer's span");
    expect(parentSpanId(sdk.one("process work"))).toBe(b.spanId);
    expect(sdk.one("process work").attributes["rabbit_inbox.event_id"]).toBe("e-2");
  });

  it("ends the batch's span with status error when the pipeline rejects the batch", async () => {
    const configError = new InboxConfigError("handleBatch rejected index 7, outside the batch of 1");
    const handler: InboxHandler<TestEvent, MemoryHandle> = { name: "tracer", handleBatch: () => Promise.reject(configError) };
    const { consumer } = env.build({ handler, store: memoryStoreWithOutbox() });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: producerTraceparent("a").traceparent } });
    await expect(consumer.whenStopped()).rejects.toBe(configError);
    await until(() => sdk.spans().some((s) => s.name === "process work"), "batch span ended");
    const process = sdk.one("process work");
    expect(process.status).toEqual({ code: 2, message: "the pipeline rejected the batch; deliveries given back unsettled" });
    expect(process.events.map((e) => e.name)).toEqual(["exception"]);
  });

  it("counts a delivery given back because the broker refused its quarantine copy, with status error", async () => {
    let refusals = 1;
    broker.confirmPolicy = (routingKey) => !(routingKey === "work.quarantine" && refusals-- > 0);
    const { consumer } = env.build({ handler: batchHandler, store: memoryStoreWithOutbox() });
    await consumer.start();
    broker.publishJson("work", event("never-1"), { headers: { traceparent: producerTraceparent("a").traceparent } });
    await until(() => consumer.outcomeCounts.quarantined === 1, "quarantined on its return");
    await until(() => sdk.spans().filter((s) => s.name === "process work").length === 2, "both batches' spans ended");
    const [refused, returned] = sdk.spans().filter((s) => s.name === "process work");
    expect(refused!.attributes).toMatchObject({ "rabbit_inbox.outcome_count.requeue": 1 });
    expect(refused!.attributes).not.toHaveProperty("rabbit_inbox.outcome_count.quarantined");
    expect(refused!.status).toEqual({ code: 2, message: "deliveries given back to the broker" });
    expect(refused!.events.map((e) => [e.name, e.attributes?.["rabbit_inbox.event_id"]])).toEqual([["requeue", "never-1"]]);
    expect(returned!.attributes).toMatchObject({ "rabbit_inbox.outcome_count.quarantined": 1 });
  });

  it("names a batch holding several partition queues after the operation alone, without a destination, and lists its queues", async () => {
    const store = memoryStoreWithOutbox();
    const partitions = { count: 2, memberId: "solo", heartbeatMs: 10, memberTimeoutMs: 60 };
    const { consumer } = env.build({ handler: batchHandler, store, batchSize: 50, prefetch: 50, processSpans: "batch", partitions });
    await consumer.start();
    await until(() => consumer.heldPartitions.length === 2, "both partitions held");
    sdk.reset();
    // Published in one turn: the first batch starts on the next one, holding both partitions' deliveries.
    for (let k = 0; k < 20; k++) broker.publish("work", `t1/acct-${k}`, JSON.stringify(event(`e-${k}`)), { contentType: "application/json" });
    await until(() => consumer.outcomeCounts.applied === 20, "applied");
    await until(() => sdk.spans().some((s) => s.name.startsWith("process")), "batch span ended");
    const process = sdk.one("process");
    expect(process.attributes).toMatchObject({ "rabbit_inbox.queues": ["work.p0", "work.p1"], "messaging.batch.message_count": 20, "rabbit_inbox.handler": "tracer" });
    expect(process.attributes).not.toHaveProperty("messaging.destination.name");
    await consumer.stop();
  });

  it("refuses an unknown processSpans value before anything connects", () => {
    expect(() => env.build({ handler: batchHandler, processSpans: "delivery" as never })).toThrow(InboxConfigError);
    expect(() => env.build({ handler: batchHandler, processSpans: "delivery" as never })).toThrow(/processSpans must be "message" or "batch", got delivery/);
  });
});

describe("a delivery with a tracestate", () => {
  const handler: InboxHandler<TestEvent, MemoryHandle> = {
    name: "tracer",
    async handle(e, ctx) {
      if (e.event_id.startsWith("never")) throw new PermanentEventError("account_closed", "closed");
      await ctx.publish("downstream", "event.applied", { id: e.event_id });
    },
  };

  it("is read through the propagator, so the row carries the producer's tracestate on (spans per message)", async () => {
    const store = memoryStoreWithOutbox();
    const { consumer } = env.build({ handler, store, processSpans: "message" });
    const a = producerTraceparent("a");
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: a.traceparent, tracestate: "vendor=opaque" } });
    await until(() => consumer.outcomeCounts.applied === 1, "applied");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "process span ended");
    expect(parentSpanId(sdk.one("process work"))).toBe(a.spanId);
    expect(outboxHeaders(store, 0).tracestate).toBe("vendor=opaque");
  });

  it("is carried on to the row with spans per batch too", async () => {
    const store = memoryStoreWithOutbox();
    const { consumer } = env.build({ handler, store, processSpans: "batch" });
    const a = producerTraceparent("a");
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: a.traceparent, tracestate: "vendor=opaque" } });
    await until(() => consumer.outcomeCounts.applied === 1, "applied");
    expect(outboxHeaders(store, 0)).toMatchObject({ traceparent: a.traceparent, tracestate: "vendor=opaque" });
  });
});
