/**
 * Without an OpenTelemetry SDK registered, tracing adds nothing: no `traceparent` is invented on
 * outbox rows or on quarantine copies, and a producer's own `traceparent` passes through a
 * quarantine copy exactly as it came (as it always did), while the outbox row carries only
 * the headers the handler gave it.
 */
import { trace } from "@opentelemetry/api";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { PermanentEventError } from "../../src/core/errors.js";
import { publishRowInSpan, withTraceHeaders } from "../../src/observability/publish-trace.js";
import type { OutboxRow } from "../../src/core/store-contract/outbox-relay-store.js";
import type { InboxHandler } from "../../src/core/handler.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { type TestEvent, fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const PRODUCER_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const event = (eventId: string) => ({ tenant: "t1", event_id: eventId });
const headersOf = (frame: { properties: Record<string, unknown> }) => frame.properties.headers as Record<string, unknown>;

function publishingHandler(): InboxHandler<TestEvent, MemoryHandle> {
  return {
    name: "untraced",
    async handle(e, ctx) {
      if (e.event_id.startsWith("never")) throw new PermanentEventError("account_closed", "closed");
      await ctx.publish("downstream", "event.applied", { id: e.event_id }, { headers: { origin: "handler" } });
    },
  };
}

describe("tracing without an SDK", () => {
  it("has no tracer provider registered in this file (the premise of every test here)", () => {
    const span = trace.getTracer("probe").startSpan("probe");
    expect(span.isRecording()).toBe(false);
    expect(trace.isSpanContextValid(span.spanContext())).toBe(false);
    span.end();
  });

  it("writes outbox rows with only the handler's headers, with or without a producer traceparent", async () => {
    const store = new MemoryStore();
    store.outbox = [];
    const { consumer } = env.build({ handler: publishingHandler(), store });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { traceparent: PRODUCER_TRACEPARENT } });
    broker.publishJson("work", event("e-2"));
    await until(() => consumer.outcomeCounts.applied === 2, "both applied");

    expect(store.outbox.map((r) => (JSON.parse(r.properties) as { headers: unknown }).headers)).toEqual([{ origin: "handler" }, { origin: "handler" }]);
  });

  it("copies a quarantined message's headers as they came: the producer's traceparent unchanged, none added when it had none", async () => {
    const { consumer } = env.build({ handler: publishingHandler() });
    await consumer.start();
    broker.publishJson("work", event("never-1"), { headers: { traceparent: PRODUCER_TRACEPARENT } });
    broker.publishJson("work", event("never-2"));
    await until(() => consumer.outcomeCounts.quarantined === 2, "both quarantined");

    const copies = broker.framesOf("publish").filter((f) => f.routingKey === "work.quarantine").map(headersOf);
    const traced = copies.find((h) => h["x-rabbit-inbox-event-id"] === "never-1")!;
    const untraced = copies.find((h) => h["x-rabbit-inbox-event-id"] === "never-2")!;
    expect(traced.traceparent).toBe(PRODUCER_TRACEPARENT);
    expect(traced).not.toHaveProperty("tracestate");
    expect(untraced).not.toHaveProperty("traceparent");
    expect(untraced).not.toHaveProperty("tracestate");
  });

  it("hands the relay's publish the stored row itself, and leaves a row's headers untouched", async () => {
    const row: OutboxRow = {
      id: 1, messageId: "m-1", exchange: "x", routingKey: "k", body: Buffer.from("{}"), orderingKey: null, attempts: 0,
      properties: { headers: { traceparent: PRODUCER_TRACEPARENT } },
    };
    const published: OutboxRow[] = [];
    await publishRowInSpan(row, (r) => { published.push(r); return Promise.resolve(); });
    expect(published).toHaveLength(1);
    expect(published[0]).toBe(row);
    const headers = { origin: "handler" };
    expect(withTraceHeaders(headers)).toBe(headers);
    expect(withTraceHeaders(undefined)).toBeUndefined();
  });
});
