/**
 * Traces of the consumer with a real OpenTelemetry SDK, over the in-memory broker, with
 * `processSpans: "message"`: a process span per delivery under the producer's `traceparent`,
 * the transaction as its child, the outcome on the span, the context stored with the outbox
 * rows a handler writes, and the quarantine and delayed-retry copies published in spans of
 * their own whose context they carry.
 */
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest";
import { trace } from "@opentelemetry/api";
import { InboxConfigError, PermanentEventError } from "../../src/core/errors.js";
import { silentLogger } from "../../src/core/logger.js";
import type { IncomingMessage } from "../../src/core/incoming-message.js";
import { openTelemetryInstrumentation } from "../../src/observability/message-trace.js";
import { Outbox } from "../../src/outbox/outbox.js";
import type { InboxHandler } from "../../src/core/handler.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { type TestEvent, fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { type MemoryHandle, type MemoryStore, memoryStoreWithOutbox } from "../support/memory-store.js";
import { parentSpanId, parseTraceparent, producerTraceparent, registerTracingSdk } from "../support/tracing-sdk.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const sdk = registerTracingSdk();
afterAll(() => sdk.shutdown());

const env = fakeBrokerPerTest();
/** These tests are about spans per message, which strict mode gets by default and a batched consumer by asking. */
const build = (options: Parameters<typeof env.build>[0] = {}) => env.build({ processSpans: "message", ...options });
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
  sdk.reset();
});

const event = (eventId: string) => ({ tenant: "t1", event_id: eventId });
const publishesTo = (routingKey: string) => broker.framesOf("publish").filter((f) => f.routingKey === routingKey);
const headersOf = (frame: { properties: Record<string, unknown> }) => frame.properties.headers as Record<string, unknown>;
const outboxHeaders = (store: MemoryStore, index = 0) => (JSON.parse(store.outbox![index]!.properties) as { headers?: Record<string, unknown> }).headers;

/** Publishes one outbox message per event, and refuses events whose id starts with "never". */
function publishingHandler(): InboxHandler<TestEvent, MemoryHandle> {
  return {
    name: "tracer",
    async handle(e, ctx) {
      if (e.event_id.startsWith("never")) throw new PermanentEventError("account_closed", "closed");
      await ctx.publish("downstream", "event.applied", { id: e.event_id }, { headers: { origin: "handler" } });
    },
  };
}

describe("consume spans", () => {
  it("continues the producer's trace: process span, transaction span, and the outbox row carries the transaction's context", async () => {
    const store = memoryStoreWithOutbox();
    const { consumer } = build({ handler: publishingHandler(), store });
    await consumer.start();
    const producer = producerTraceparent();
    broker.publishJson("work", event("e-1"), { messageId: "m-1", headers: { traceparent: producer.traceparent } });
    await until(() => consumer.outcomeCounts.applied === 1, "applied");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "process span ended");

    const process = sdk.one("process work");
    const transaction = sdk.one("transaction tracer");
    expect(process.spanContext().traceId).toBe(producer.traceId);
    expect(parentSpanId(process)).toBe(producer.spanId);
    expect(process.kind).toBe(4); // CONSUMER
    expect(process.attributes).toMatchObject({
      "messaging.system": "rabbitmq", "messaging.operation.type": "process", "messaging.destination.name": "work",
      "messaging.rabbitmq.destination.routing_key": "work", "messaging.message.id": "m-1",
      "rabbit_inbox.outcome": "applied", "rabbit_inbox.duplicate": false, "rabbit_inbox.tenant": "t1", "rabbit_inbox.event_id": "e-1",
    });
    expect(transaction.spanContext().traceId).toBe(producer.traceId);
    expect(parentSpanId(transaction)).toBe(process.spanContext().spanId);

    const headers = outboxHeaders(store)!;
    expect(headers.origin).toBe("handler");
    const stored = parseTraceparent(headers.traceparent);
    expect(stored).toEqual({ traceId: producer.traceId, spanId: transaction.spanContext().spanId });
  });

  it("marks a duplicate on its span, and writes no outbox row for it", async () => {
    const store = memoryStoreWithOutbox();
    const { consumer } = build({ handler: publishingHandler(), store });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: producerTraceparent().traceparent } });
    await until(() => consumer.outcomeCounts.applied === 1, "applied");
    broker.publishJson("work", event("e-1"), { headers: { traceparent: producerTraceparent().traceparent } });
    await until(() => consumer.outcomeCounts.duplicate === 1, "duplicate");
    await until(() => sdk.spans().filter((s) => s.name === "process work").length === 2, "both process spans ended");

    const [first, second] = sdk.spans().filter((s) => s.name === "process work");
    expect(first!.attributes["rabbit_inbox.duplicate"]).toBe(false);
    expect(second!.attributes).toMatchObject({ "rabbit_inbox.outcome": "duplicate", "rabbit_inbox.duplicate": true });
    expect(store.outbox).toHaveLength(1);
  });

  it("starts a new trace for a message without traceparent, and its outbox row carries that trace", async () => {
    const store = memoryStoreWithOutbox();
    const { consumer } = build({ handler: publishingHandler(), store });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.applied === 1, "applied");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "process span ended");

    const process = sdk.one("process work");
    expect(parentSpanId(process)).toBeUndefined();
    expect(parseTraceparent(outboxHeaders(store)!.traceparent).traceId).toBe(process.spanContext().traceId);
  });

  it("makes no span for a message whose producer sampled its trace out, and its outbox row carries that decision on", async () => {
    const store = memoryStoreWithOutbox();
    const { consumer } = build({ handler: publishingHandler(), store });
    await consumer.start();
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const spanId = "00f067aa0ba902b7";
    broker.publishJson("work", event("e-1"), { headers: { traceparent: `00-${traceId}-${spanId}-00` } });
    broker.publishJson("work", event("e-2"));
    await until(() => consumer.outcomeCounts.applied === 2, "applied");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "the traced message's span ended");
    await consumer.stop();

    // Only e-2 (no traceparent: a new, sampled trace) has spans.
    const processes = sdk.spans().filter((s) => s.name === "process work");
    expect(processes).toHaveLength(1);
    expect(processes[0]!.attributes["rabbit_inbox.event_id"]).toBe("e-2");
    expect(sdk.spans().every((s) => s.spanContext().traceId !== traceId)).toBe(true);
    // e-1's row: the producer's trace and span, still marked not sampled.
    expect(outboxHeaders(store, 0)!.traceparent).toBe(`00-${traceId}-${spanId}-00`);
    expect(parseTraceparent(outboxHeaders(store, 1)!.traceparent).traceId).toBe(processes[0]!.spanContext().traceId);
  });

  it("gives each event of a handleBatch call its own trace in its outbox row; the transaction links the other messages", async () => {
    const store = memoryStoreWithOutbox();
    const handler: InboxHandler<TestEvent, MemoryHandle> = {
      name: "tracer",
      async handleBatch(items) {
        for (const { event: e, ctx } of items) await ctx.publish("downstream", "event.applied", { id: e.event_id });
        return [];
      },
    };
    const { consumer } = build({ handler, store, batchSize: 2, prefetch: 2 });
    const a = producerTraceparent("a");
    const b = producerTraceparent("b");
    await consumer.start();
    broker.publishJson("work", event("e-a"), { headers: { traceparent: a.traceparent } });
    broker.publishJson("work", event("e-b"), { headers: { traceparent: b.traceparent } });
    await until(() => consumer.outcomeCounts.applied === 2, "both applied");
    await until(() => sdk.spans().filter((s) => s.name === "process work").length === 2, "both process spans ended");

    const rows = store.outbox!.map((_, i) => parseTraceparent(outboxHeaders(store, i)!.traceparent).traceId);
    const transactions = sdk.spans().filter((s) => s.name === "transaction tracer");
    // One transaction for both: a child of the first message's span, linked to the second's.
    expect(transactions).toHaveLength(1);
    const processB = sdk.spans().find((s) => s.name === "process work" && s.spanContext().traceId === b.traceId)!;
    expect(transactions[0]!.spanContext().traceId).toBe(a.traceId);
    expect(transactions[0]!.links.map((l) => l.context.spanId)).toEqual([processB.spanContext().spanId]);
    expect(transactions[0]!.attributes["messaging.batch.message_count"]).toBe(2);
    expect(rows).toEqual([a.traceId, b.traceId]);
  });
});

describe("copies published by the consumer", () => {
  it("publishes the quarantine copy in a span under the process span, the copy carrying that span's context", async () => {
    const { consumer } = build({ handler: publishingHandler(), store: memoryStoreWithOutbox() });
    await consumer.start();
    const producer = producerTraceparent();
    broker.publishJson("work", event("never-1"), { headers: { traceparent: producer.traceparent } });
    await until(() => consumer.outcomeCounts.quarantined === 1, "quarantined");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "process span ended");

    const process = sdk.one("process work");
    const publish = sdk.one("publish amq.default");
    expect(process.attributes).toMatchObject({ "rabbit_inbox.outcome": "quarantined", "rabbit_inbox.quarantine.reason": "account_closed" });
    expect(process.events.map((e) => e.name)).toContain("quarantined");
    expect(publish.spanContext().traceId).toBe(producer.traceId);
    expect(parentSpanId(publish)).toBe(process.spanContext().spanId);
    expect(publish.kind).toBe(3); // PRODUCER
    expect(publish.attributes).toMatchObject({
      "messaging.system": "rabbitmq", "messaging.operation.type": "send", "messaging.destination.name": "amq.default",
      "messaging.rabbitmq.destination.routing_key": "work.quarantine",
    });
    const [copy] = publishesTo("work.quarantine");
    expect(parseTraceparent(headersOf(copy!).traceparent)).toEqual({ traceId: producer.traceId, spanId: publish.spanContext().spanId });
    expect(headersOf(copy!)["x-rabbit-inbox-reason"]).toBe("account_closed");
  });

  it("publishes a delayed-retry copy in a span too, the copy carrying its context", async () => {
    const handler: InboxHandler<TestEvent, MemoryHandle> = { name: "tracer", handle: () => Promise.reject(new Error("ECONNRESET flaky")) };
    const { consumer } = build({ handler, retryDelaysMs: [1000] });
    await consumer.start();
    const producer = producerTraceparent();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: producer.traceparent } });
    await until(() => consumer.outcomeCounts.delayed + consumer.outcomeCounts.quarantined + consumer.outcomeCounts.requeue > 0, "settled");
    await until(() => sdk.spans().some((s) => s.name === "process work"), "process span ended");

    const process = sdk.spans().find((s) => s.name === "process work")!;
    expect(process.attributes["rabbit_inbox.outcome"]).toBe("delayed");
    const publish = sdk.one("publish amq.default");
    expect(parentSpanId(publish)).toBe(process.spanContext().spanId);
    const copies = broker.framesOf("publish").filter((f) => f.routingKey !== "work");
    expect(copies).toHaveLength(1);
    expect(parseTraceparent(headersOf(copies[0]!).traceparent)).toEqual({ traceId: producer.traceId, spanId: publish.spanContext().spanId });
  });
});

describe("spans of deliveries that did not settle as decided", () => {
  it("records requeue, not quarantined, on the span of a delivery whose quarantine copy the broker refused", async () => {
    let refusals = 1;
    broker.confirmPolicy = (routingKey) => !(routingKey === "work.quarantine" && refusals-- > 0);
    const { consumer } = build({ handler: publishingHandler(), store: memoryStoreWithOutbox() });
    await consumer.start();
    broker.publishJson("work", event("never-1"), { headers: { traceparent: producerTraceparent().traceparent } });
    await until(() => consumer.outcomeCounts.quarantined === 1, "quarantined on its return");
    await until(() => sdk.spans().filter((s) => s.name === "process work").length === 2, "both deliveries' spans ended");
    const [refused, returned] = sdk.spans().filter((s) => s.name === "process work");
    expect(refused!.attributes["rabbit_inbox.outcome"]).toBe("requeue");
    expect(refused!.status.code).toBe(2); // ERROR
    expect(refused!.events.map((e) => e.name)).not.toContain("quarantined");
    expect(returned!.attributes["rabbit_inbox.outcome"]).toBe("quarantined");
  });

  it("ends the span with status error when the pipeline rejects the batch", async () => {
    const configError = new InboxConfigError("handleBatch rejected index 7, outside the batch of 1");
    const handler: InboxHandler<TestEvent, MemoryHandle> = { name: "tracer", handleBatch: () => Promise.reject(configError) };
    const { consumer } = build({ handler, store: memoryStoreWithOutbox() });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: producerTraceparent().traceparent } });
    await expect(consumer.whenStopped()).rejects.toBe(configError);
    await until(() => sdk.spans().some((s) => s.name === "process work"), "process span ended");
    expect(sdk.one("process work").status).toEqual({ code: 2, message: "the pipeline rejected the batch; delivery given back unsettled" });
  });

  it("ends the span of a delivery whose settling failed (the application's callbacks are contained: here its logger throws)", async () => {
    let throws = 1;
    const { consumer } = build({
      handler: publishingHandler(), store: memoryStoreWithOutbox(),
      logger: { ...silentLogger, debug: (message) => { if (message === "batch settled" && throws-- > 0) throw new Error("log shipper crashed"); } },
    });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: producerTraceparent().traceparent } });
    await until(() => consumer.outcomeCounts.duplicate === 1, "the redelivery's duplicate");
    await until(() => sdk.spans().filter((s) => s.name === "process work").length === 2, "both deliveries' spans ended");
    expect(sdk.spans().filter((s) => s.name === "process work").map((s) => s.attributes["rabbit_inbox.outcome"])).toEqual(["applied", "duplicate"]);
  });
});

describe("ending a settled batch's spans", () => {
  it("ends them on the next turn of the event loop, stamped with the time the batch was settled", async () => {
    const producer = producerTraceparent();
    sdk.reset();
    const message = {
      body: Buffer.from("{}"), contentType: "application/json", contentEncoding: undefined,
      delivery: { queue: "work", redelivered: false, headers: { traceparent: producer.traceparent } },
      describeProperties: () => "{}",
    } as unknown as IncomingMessage;
    openTelemetryInstrumentation.startDeliveries([{ incoming: message }], () => ({ queue: "work", routingKey: "work", deliveryTag: 1, handler: "tracer" }), "message");
    await new Promise((resolve) => setTimeout(resolve, 60));
    const settledAt = performance.now() - 40;
    const now = vi.spyOn(performance, "now").mockReturnValueOnce(settledAt);
    openTelemetryInstrumentation.deliveriesSettled([message], [{ kind: "applied", key: { tenant: "t1", eventId: "e-1" } }]);
    now.mockRestore();
    expect(sdk.spans()).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    const span = sdk.one("process work");
    const endMs = span.endTime[0] * 1000 + span.endTime[1] / 1e6;
    // 40 ms before the call, as stamped, not when the span was ended.
    expect(Math.abs(endMs - (performance.timeOrigin + settledAt))).toBeLessThan(5);
    expect(span.attributes["rabbit_inbox.outcome"]).toBe("applied");
  });
});

describe("standalone outbox transactions", () => {
  it("store the caller's active span with each row, and nothing when no span is active", async () => {
    const store = memoryStoreWithOutbox();
    const outbox = new Outbox(store);
    await trace.getTracer("test-app").startActiveSpan("request", async (span) => {
      await outbox.transaction(async (_tx, publish) => { await publish("orders", "order.created", { id: 1 }); });
      span.end();
      const stored = parseTraceparent(outboxHeaders(store, 0)!.traceparent);
      expect(stored).toEqual({ traceId: span.spanContext().traceId, spanId: span.spanContext().spanId });
    });
    await outbox.transaction(async (_tx, publish) => { await publish("orders", "order.created", { id: 2 }, { headers: { origin: "app" } }); });
    expect(outboxHeaders(store, 1)).toEqual({ origin: "app" });
  });
});
