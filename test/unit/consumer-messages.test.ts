/**
 * What the consumer makes of an AMQP message and what it sends back, over an in-memory broker:
 * the delivery facts a handler and the stale fence read (content type and encoding, message id,
 * timestamp, delivery count), the AMQP properties kept with a quarantine record, the options it
 * hands the pipeline, the quarantine and delayed-retry copies (which properties they carry, how
 * long their detail headers may be), and the log lines an operator reads about them.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { PermanentEventError, RetryLaterError, TransientStoreError } from "../../src/core/errors.js";
import type { DeliveryInfo, InboxHandler } from "../../src/core/handler.js";
import type { FaultPoint } from "../../src/core/pipeline.js";
import type { Outcome } from "../../src/core/outcome.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { type TestEvent, ackFrames, brokerClosedChannels, type fakeConsumer, settleTurns, until, fakeBrokerPerTest, givenBackChannels } from "../support/fake-consumer.js";
import { type LogLine, logged } from "../support/recording-logger.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const start = (options: Parameters<typeof fakeConsumer>[1] = {}) => env.build(options);

const event = (eventId: string, extra: Record<string, unknown> = {}) => ({ tenant: "t1", event_id: eventId, ...extra });
const errorLines = (lines: readonly LogLine[]) => lines.filter((l) => l.level === "error");
const publishesTo = (routingKey: string) => broker.framesOf("publish").filter((f) => f.routingKey === routingKey);
const headersOf = (frame: { properties: Record<string, unknown> }) => frame.properties.headers as Record<string, unknown>;

/** A handler that keeps the delivery facts of every event it applies. */
function deliveryRecorder(seen: Map<string, DeliveryInfo>): InboxHandler<TestEvent, MemoryHandle> {
  return {
    name: "fake-consumer",
    handle(e, ctx) {
      seen.set(e.event_id, ctx.delivery);
      ctx.tx.effects.push(e.event_id);
      return Promise.resolve();
    },
  };
}

/** Refuses events whose id starts with `later` (not yet) or `never` (permanently, with the event's `detail`). */
function refusingHandler(): InboxHandler<TestEvent & { detail?: string }, MemoryHandle> {
  return {
    name: "fake-consumer",
    handle(e, ctx) {
      if (e.event_id.startsWith("later")) throw new RetryLaterError("account_missing", e.detail ?? `account of ${e.event_id} not opened yet`);
      if (e.event_id.startsWith("never")) throw new PermanentEventError("account_closed", e.detail ?? `account of ${e.event_id} is closed`);
      ctx.tx.effects.push(e.event_id);
      return Promise.resolve();
    },
  };
}

describe("delivery facts handed to the pipeline", () => {
  it("gives the handler the message id, the timestamp (seconds to a Date) and the quorum delivery count", async () => {
    const seen = new Map<string, DeliveryInfo>();
    const { consumer } = start({ handler: deliveryRecorder(seen) });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { messageId: "m-1", timestamp: 1_700_000_000, headers: { "x-delivery-count": 2 } });
    broker.publishJson("work", event("e-2"));
    await until(() => consumer.outcomeCounts.applied === 2, "both applied");

    const first = seen.get("e-1")!;
    expect(first.messageId).toBe("m-1");
    expect(first.timestamp).toEqual(new Date(1_700_000_000_000));
    expect(first.deliveryCount).toBe(2);
    expect(first.queue).toBe("work");
    expect(first.headers).toMatchObject({ "x-delivery-count": 2 });
    const second = seen.get("e-2")!;
    expect(second.messageId).toBeUndefined();
    expect(second.timestamp).toBeUndefined();
    expect(second.deliveryCount).toBeUndefined();
  });

  it("ignores properties and a delivery count of another type than AMQP gives them, instead of misreading them", async () => {
    const seen = new Map<string, DeliveryInfo>();
    const { consumer, store } = start({ handler: deliveryRecorder(seen), maxDeliveries: 3 });
    await consumer.start();
    // A producer's own "x-delivery-count" text is not the broker's count: no poison verdict from it.
    broker.publishJson("work", event("e-1"), { messageId: 7, timestamp: "2023-11-14", headers: { "x-delivery-count": "5" } });
    broker.publish("", "work", JSON.stringify(event("e-2")), { contentType: 42, contentEncoding: 7 });
    await until(() => consumer.outcomeCounts.applied === 2, "both applied");

    const first = seen.get("e-1")!;
    expect(first.messageId).toBeUndefined();
    expect(first.timestamp).toBeUndefined();
    expect(first.deliveryCount).toBeUndefined();
    expect(store.effects.sort()).toEqual(["e-1", "e-2"]);
    expect(consumer.outcomeCounts.quarantined).toBe(0);
  });

  it("decodes by the message's content type and encoding: a body that is not JSON by them is quarantined as invalid", async () => {
    const { consumer, store } = start();
    await consumer.start();
    broker.publish("", "work", JSON.stringify(event("e-1")), { contentType: "text/html" });
    broker.publish("", "work", JSON.stringify(event("e-2")), { contentType: "application/json", contentEncoding: "gzip" });
    broker.publish("", "work", JSON.stringify(event("e-3")), { contentType: "application/json; charset=utf-8", contentEncoding: "UTF-8" });
    await until(() => consumer.outcomeCounts.quarantined + consumer.outcomeCounts.applied === 3, "three settled");

    expect(store.effects).toEqual(["e-3"]);
    const details = store.quarantined.map((r) => [r.reason, r.detail]);
    expect(details).toEqual([
      ["invalid", 'content type "text/html" is not JSON (use application/json)'],
      ["invalid", 'content encoding "gzip" is not supported'],
    ]);
  });

  it("judges staleness by the AMQP timestamp, read in seconds", async () => {
    const store = new MemoryStore();
    store.horizon = new Date("2023-01-01T00:00:00Z");
    const { consumer } = start({ store });
    await consumer.start();
    broker.publishJson("work", event("fresh"), { timestamp: 1_700_000_000 }); // 2023-11-14
    broker.publishJson("work", event("old"), { timestamp: 1_600_000_000 }); // 2020-09-13
    await until(() => consumer.outcomeCounts.quarantined + consumer.outcomeCounts.applied === 2, "both settled");

    expect(store.effects).toEqual(["fresh"]);
    expect(store.quarantined.map((r) => [r.reason, r.key?.eventId, r.eventTime])).toEqual([["stale", "old", new Date(1_600_000_000_000)]]);
  });
});

describe("options the consumer passes on to the pipeline", () => {
  it("retries a failed transaction as often as `retry` says before giving the deliveries back", async () => {
    const store = new MemoryStore();
    store.script = (n) => {
      if (n <= 3) throw new TransientStoreError("PostgreSQL connection lost", { kind: "connection" });
      return "commit";
    };
    const { consumer, lines } = start({ store, retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1, maxTotalMs: 1000 } });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.applied === 1, "the apply after the requeue");
    expect(logged(lines, "transaction failed, retrying").map((l) => l.fields.attempt)).toEqual([1, 2]);
    expect(logged(lines, "database unavailable after retries; deliveries go back to the broker").map((l) => l.fields.attempts)).toEqual([3]);
    expect(givenBackChannels(broker)).toHaveLength(1);
    expect(broker.framesOf("nack")).toEqual([]);
  });

  it("applies `decodeLimits` to bodies", async () => {
    const { consumer, store } = start({ decodeLimits: { maxBodyBytes: 64 } });
    await consumer.start();
    broker.publishJson("work", event("e-1", { note: "x".repeat(80) }));
    broker.publishJson("work", event("e-2"));
    await until(() => consumer.outcomeCounts.quarantined + consumer.outcomeCounts.applied === 2, "both settled");
    expect(store.effects).toEqual(["e-2"]);
    expect(store.quarantined).toHaveLength(1);
    expect(store.quarantined[0]!.detail).toMatch(/^body is \d+ bytes, over the limit of 64$/);
  });

  it("keeps at most `quarantineBodyCap` bytes of a quarantined body in its record", async () => {
    const { consumer, store } = start({ quarantineBodyCap: 8 });
    await consumer.start();
    broker.publish("", "work", "{not json at all", { contentType: "application/json" });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine");
    const record = store.quarantined[0]!;
    expect(record.body.toString()).toBe("{not jso");
    expect(record.bodyTruncated).toBe(true);
    // The copy on the quarantine queue keeps the whole body.
    expect(publishesTo("work.quarantine")[0]!.content.toString()).toBe("{not json at all");
  });

  it("reads the event time from the body field `staleFence` names when there is no AMQP timestamp", async () => {
    const store = new MemoryStore();
    store.horizon = new Date("2023-01-01T00:00:00Z");
    const { consumer } = start({ store, staleFence: { eventTimeField: "occurred_at" } });
    await consumer.start();
    broker.publishJson("work", event("old", { occurred_at: "2022-06-01T00:00:00Z" }));
    broker.publishJson("work", event("fresh", { occurred_at: "2023-06-01T00:00:00Z" }));
    await until(() => consumer.outcomeCounts.quarantined + consumer.outcomeCounts.applied === 2, "both settled");
    expect(store.effects).toEqual(["fresh"]);
    expect(store.quarantined.map((r) => [r.reason, r.key?.eventId, r.eventTime])).toEqual([["stale", "old", new Date("2022-06-01T00:00:00Z")]]);
  });

  it("calls the failure-window hook at each window: before commit, after commit, after the ack", async () => {
    const points: Array<[FaultPoint, Array<string | undefined>]> = [];
    const { consumer } = start({ hook: (point, keys) => { points.push([point, keys.map((k) => k?.eventId)]); } });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => points.length === 3, "three windows");
    expect(points).toEqual([["before-commit", ["e-1"]], ["after-commit", ["e-1"]], ["after-ack", ["e-1"]]]);
  });

  it("quarantines a delivery redelivered `maxDeliveries` times as retries_exhausted, without running its handler", async () => {
    const { consumer, store } = start({ maxDeliveries: 3 });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { "x-delivery-count": 3 } });
    broker.publishJson("work", event("e-2"), { headers: { "x-delivery-count": 2 } });
    await until(() => consumer.outcomeCounts.quarantined + consumer.outcomeCounts.applied === 2, "both settled");
    expect(store.effects).toEqual(["e-2"]);
    expect(store.quarantined.map((r) => [r.reason, r.key?.eventId])).toEqual([["retries_exhausted", "e-1"]]);
  });

  it("uses delays of 1 s, 10 s and 60 s unless told", async () => {
    const { consumer } = start({ retryDelaysMs: undefined });
    await consumer.start();
    expect(["work.retry.1", "work.retry.2", "work.retry.3"].map((q) => broker.queue(q).arguments["x-message-ttl"])).toEqual([1000, 10_000, 60_000]);
    expect(broker.queues.has("work.retry.4")).toBe(false);
  });
});

describe("the AMQP properties kept with a quarantine record", () => {
  it("keeps the delivery's exchange, routing key, redelivered flag and properties as JSON", async () => {
    const { consumer, store } = start();
    await consumer.start();
    broker.publish("", "work", "{not json", { contentType: "application/json", messageId: "m-9", timestamp: 1_700_000_000, headers: { "x-trace": "abc" } });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine");
    expect(JSON.parse(store.quarantined[0]!.properties)).toEqual({
      fields: { exchange: "", routingKey: "work", redelivered: false },
      properties: { contentType: "application/json", messageId: "m-9", timestamp: 1_700_000_000, headers: { "x-trace": "abc" } },
    });
  });

  it("shows a header's bytes by their count and a 64-bit integer as text", async () => {
    const { consumer, store } = start();
    await consumer.start();
    broker.publish("", "work", "{not json", { headers: { "x-bytes": Buffer.from("abcdef"), "x-big": 12_345_678_901_234_567_890n } });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine");
    const { properties } = JSON.parse(store.quarantined[0]!.properties) as { properties: { headers: Record<string, unknown> } };
    expect(properties.headers).toEqual({ "x-bytes": "<6 bytes>", "x-big": "12345678901234567890" });
  });

  it("still quarantines a message whose properties cannot be written as JSON, with {} for them", async () => {
    const { consumer, store } = start();
    await consumer.start();
    const loop: Record<string, unknown> = { name: "loop" };
    loop.self = loop;
    broker.publish("", "work", "{not json", { headers: { "x-loop": loop } });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine");
    expect(store.quarantined[0]!.properties).toBe("{}");
    // Acks go out at the end of the event loop's turn, after the outcome is counted.
    await settleTurns();
    expect(ackFrames(broker)).toHaveLength(1);
  });
});

describe("the quarantine copy", () => {
  it("carries only the properties the original had", async () => {
    const { consumer } = start();
    await consumer.start();
    broker.publish("", "work", "{not json");
    await until(() => ackFrames(broker).length === 1, "the ack");
    const [copy] = publishesTo("work.quarantine");
    // toStrictEqual: a property the original did not have must not appear, even as undefined.
    expect({ ...copy!.properties, headers: undefined }).toStrictEqual({ persistent: true, headers: undefined });
  });

  it("cuts the detail header at 1000 characters and the log line's at 300; the record keeps it whole", async () => {
    const detail = Array.from({ length: 150 }, (_, i) => `part-${String(i).padStart(4, "0")}`).join("");
    expect(detail.length).toBe(1350);
    const { consumer, store, lines } = start({ handler: refusingHandler() });
    await consumer.start();
    broker.publishJson("work", event("never-1", { detail }));
    await until(() => ackFrames(broker).length === 1, "the ack");

    expect(headersOf(publishesTo("work.quarantine")[0]!)["x-rabbit-inbox-detail"]).toBe(detail.slice(0, 1000));
    expect(logged(lines, "event quarantined").map((l) => l.fields)).toEqual([{
      handler: "fake-consumer", reason: "account_closed", tenant: "t1", eventId: "never-1", detail: detail.slice(0, 300), quarantineQueue: "work.quarantine",
    }]);
    expect(store.quarantined[0]!.detail).toBe(detail);
  });

  it("names the event and the broker's refusal when the copy is not confirmed, and hands the requeue outcome its reason", async () => {
    let refusals = 1;
    broker.confirmPolicy = (routingKey) => !(routingKey === "work.quarantine" && refusals-- > 0);
    const outcomes: Outcome[] = [];
    const { consumer, lines } = start({ handler: refusingHandler(), onOutcome: (o) => outcomes.push(o) });
    await consumer.start();
    broker.publishJson("work", event("never-1"));
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine of the redelivery");

    expect(errorLines(lines).map((l) => [l.message, l.fields])).toEqual([[
      "quarantine publish not confirmed; the original stays unacked and comes back",
      { reason: "account_closed", tenant: "t1", eventId: "never-1", error: "broker refused the publish: message nacked" },
    ]]);
    const requeue = outcomes[0]!;
    expect(requeue).toMatchObject({ kind: "requeue", key: { tenant: "t1", eventId: "never-1" } });
    expect((requeue as Extract<Outcome, { kind: "requeue" }>).error).toEqual(new Error("publish not confirmed"));
    expect(outcomes.map((o) => o.kind)).toEqual(["requeue", "quarantined"]);
  });

  it("is not attempted for a delivery whose connection was lost while its batch ran: the delivery comes back and is quarantined then", async () => {
    let dropped = false;
    const outcomes: Outcome[] = [];
    const { consumer, lines } = start({
      onOutcome: (o) => outcomes.push(o),
      hook: (point: FaultPoint) => {
        if (point === "after-commit" && !dropped) {
          dropped = true;
          broker.dropConnection(broker.connections[0]!);
        }
      },
    });
    await consumer.start();
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine on the new connection");

    expect(outcomes.map((o) => o.kind)).toEqual(["requeue", "quarantined"]);
    expect(publishesTo("work.quarantine").map((f) => f.connection)).toEqual([2]);
    expect(ackFrames(broker).map((f) => f.connection)).toEqual([2]);
    expect(errorLines(lines)).toEqual([]);
  });
});

describe("the delayed-retry copy", () => {
  it("carries the content type, message id and timestamp when the original had them, and only then", async () => {
    const { consumer } = start({ retryDelaysMs: [60_000], handler: refusingHandler() });
    await consumer.start();
    broker.publishJson("work", event("later-1"), { messageId: "m-1", timestamp: 1_700_000_000 });
    broker.publish("", "work", JSON.stringify(event("later-2")));
    await until(() => consumer.outcomeCounts.delayed === 2, "both delayed");

    const [withAll, bare] = publishesTo("work.retry.1");
    expect(withAll!.properties).toMatchObject({ persistent: true, contentType: "application/json", messageId: "m-1", timestamp: 1_700_000_000 });
    // toStrictEqual: a property the original did not have must not appear, even as undefined.
    expect({ ...bare!.properties, headers: undefined }).toStrictEqual({ persistent: true, headers: undefined });
    expect(headersOf(bare!)).toMatchObject({ "x-rabbit-inbox-retry": 1 });
  });

  it("cuts the last-error header at 500 characters, and logs where the event waits", async () => {
    const detail = "e".repeat(700);
    const { consumer, lines } = start({ retryDelaysMs: [60_000], handler: refusingHandler() });
    await consumer.start();
    broker.publishJson("work", event("later-1", { detail }));
    await until(() => consumer.outcomeCounts.delayed === 1, "the delay");

    const lastError = headersOf(publishesTo("work.retry.1")[0]!)["x-rabbit-inbox-last-error"];
    expect(lastError).toBe(`account_missing: ${detail}`.slice(0, 500));
    expect(logged(lines, "delayed retry scheduled").map((l) => l.fields)).toEqual([{
      handler: "fake-consumer", tenant: "t1", eventId: "later-1", attempt: 1, delayMs: 60_000, retryQueue: "work.retry.1",
    }]);
  });

  it("names the event and the broker's refusal when the copy is not confirmed", async () => {
    let refusals = 1;
    broker.confirmPolicy = (routingKey) => !(routingKey === "work.retry.1" && refusals-- > 0);
    const { consumer, lines } = start({ retryDelaysMs: [60_000], handler: refusingHandler() });
    await consumer.start();
    broker.publishJson("work", event("later-1"));
    await until(() => consumer.outcomeCounts.delayed === 1, "the delay of the redelivery");
    expect(errorLines(lines).map((l) => [l.message, l.fields])).toEqual([[
      "delayed-retry publish not confirmed; the original stays unacked and comes back",
      { tenant: "t1", eventId: "later-1", error: "broker refused the publish: message nacked" },
    ]]);
    expect(consumer.outcomeCounts.requeue).toBe(1);
  });

  it("also takes a message whose event could not be identified (a transaction that kept failing on a malformed body)", async () => {
    const store = new MemoryStore();
    store.script = (n) => {
      if (n <= 2) throw new TransientStoreError("could not serialize access", { kind: "transient" });
      return "commit";
    };
    const { consumer, lines } = start({ store, retryDelaysMs: [5] });
    await consumer.start();
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine after the delay");

    expect(broker.framesOf("publish").map((f) => f.routingKey)).toEqual(["work.retry.1", "work.quarantine"]);
    expect(logged(lines, "delayed retry scheduled").map((l) => [l.fields.tenant, l.fields.eventId, l.fields.attempt])).toEqual([[undefined, undefined, 1]]);
    expect(errorLines(lines)).toEqual([]);
    expect(broker.framesOf("nack")).toEqual([]);
  });

  it("reports a refused copy of an unidentified message and gives the original back", async () => {
    broker.confirmPolicy = (routingKey) => routingKey !== "work.retry.1";
    const store = new MemoryStore();
    let failing = true;
    store.script = () => {
      if (failing) throw new TransientStoreError("could not serialize access", { kind: "transient" });
      return "commit";
    };
    const { consumer, lines } = start({ store, retryDelaysMs: [5] });
    await consumer.start();
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => broker.framesOf("nack").length >= 1, "the nack");
    failing = false;

    expect(errorLines(lines).map((l) => [l.message, l.fields])[0]).toEqual([
      "delayed-retry publish not confirmed; the original stays unacked and comes back",
      { tenant: undefined, eventId: undefined, error: "broker refused the publish: message nacked" },
    ]);
    expect(logged(lines, "unexpected failure settling a batch; closing its channels so the broker redelivers")).toEqual([]);
    expect(broker.framesOf("nack")[0]).toMatchObject({ tag: 1, requeue: true });
    expect(brokerClosedChannels(broker)).toEqual([]);
  });

  it("is not attempted for a delivery whose connection was lost while its batch ran", async () => {
    let dropped = false;
    const outcomes: Outcome[] = [];
    const { consumer, lines } = start({
      retryDelaysMs: [60_000], handler: refusingHandler(),
      onOutcome: (o) => outcomes.push(o),
      hook: (point: FaultPoint) => {
        if (point === "after-commit" && !dropped) {
          dropped = true;
          broker.dropConnection(broker.connections[0]!);
        }
      },
    });
    await consumer.start();
    broker.publishJson("work", event("later-1"));
    await until(() => consumer.outcomeCounts.delayed === 1, "the delay on the new connection");

    expect(outcomes.map((o) => o.kind)).toEqual(["requeue", "delayed"]);
    expect(publishesTo("work.retry.1").map((f) => f.connection)).toEqual([2]);
    expect(ackFrames(broker).map((f) => f.connection)).toEqual([2]);
    expect(errorLines(lines)).toEqual([]);
  });
});

describe("a batch with copies and plain outcomes", () => {
  it("publishes copies only of the quarantined and delayed deliveries and acks the rest as they are", async () => {
    const outcomes: Outcome[] = [];
    const { consumer, store, lines } = start({ retryDelaysMs: [60_000], handler: refusingHandler(), onOutcome: (o) => outcomes.push(o) });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    broker.publishJson("work", event("e-1"));
    broker.publishJson("work", event("later-1"));
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    broker.publishJson("work", event("e-2"));
    await until(() => logged(lines, "batch settled").length === 1 && ackFrames(broker).length > 0, "the batch");

    expect(outcomes.map((o) => o.kind)).toEqual(["applied", "duplicate", "delayed", "quarantined", "applied"]);
    expect(broker.framesOf("publish").map((f) => f.routingKey)).toEqual(["work.retry.1", "work.quarantine"]);
    expect(ackFrames(broker).map((f) => [f.tag, f.multiple])).toEqual([[5, true]]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(store.effects).toEqual(["e-1", "e-2"]);
    expect(logged(lines, "batch settled").map((l) => [l.level, l.fields])).toEqual([["debug", {
      queue: "work", messages: 5, applied: 2, duplicate: 1, quarantined: 1, delayed: 1, requeue: 0, redelivered: 0,
    }]]);
    expect(logged(lines, "redelivered deliveries settled")).toEqual([]);
    expect(errorLines(lines)).toEqual([]);
  });
});

describe("redelivered deliveries", () => {
  it("are named with their outcome in an info line once settled", async () => {
    const store = new MemoryStore();
    // The first transaction applies e-0; both attempts (retry.maxAttempts 2) of the next batch fail.
    store.script = (n) => {
      if (n === 2 || n === 3) throw new TransientStoreError("PostgreSQL connection lost", { kind: "connection" });
      return "commit";
    };
    const { consumer, lines } = start({ store });
    await consumer.start();
    broker.publishJson("work", event("e-0"));
    await until(() => consumer.outcomeCounts.applied === 1, "the first apply");
    broker.publishJson("work", event("e-0"));
    broker.publishJson("work", event("e-1"));
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => logged(lines, "redelivered deliveries settled").length === 1, "the redeliveries");

    expect(givenBackChannels(broker)).toHaveLength(1);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(logged(lines, "batch settled").map((l) => l.fields)).toEqual([
      { queue: "work", messages: 1, applied: 1, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0, redelivered: 0 },
      { queue: "work", messages: 3, applied: 0, duplicate: 0, quarantined: 0, delayed: 0, requeue: 3, redelivered: 0 },
      { queue: "work", messages: 3, applied: 1, duplicate: 1, quarantined: 1, delayed: 0, requeue: 0, redelivered: 3 },
    ]);
    const [info] = logged(lines, "redelivered deliveries settled");
    expect(info!.level).toBe("info");
    expect(info!.fields.queue).toBe("work");
    expect(info!.fields.redelivered).toBe(3);
    const events = info!.fields.events as Array<{ tenant?: string; eventId?: string; outcome: string }>;
    expect([...events].sort((a, b) => String(a.eventId).localeCompare(String(b.eventId)))).toEqual([
      { tenant: "t1", eventId: "e-0", outcome: "duplicate" },
      { tenant: "t1", eventId: "e-1", outcome: "applied" },
      { tenant: undefined, eventId: undefined, outcome: "quarantined" },
    ]);
  });

  it("list at most 50 events in that line, and count them all", async () => {
    const store = new MemoryStore();
    // Both attempts (retry.maxAttempts 2) of the first batch fail: all 60 come back redelivered.
    store.script = (n) => {
      if (n <= 2) throw new TransientStoreError("PostgreSQL connection lost", { kind: "connection" });
      return "commit";
    };
    const { consumer, lines } = start({ store, batchSize: 100 });
    await consumer.start();
    for (let i = 0; i < 60; i++) broker.publishJson("work", event(`e-${i}`));
    await until(() => consumer.outcomeCounts.applied === 60, "sixty applied");

    expect(givenBackChannels(broker)).toHaveLength(1);
    expect(broker.framesOf("nack")).toEqual([]);
    const infos = logged(lines, "redelivered deliveries settled");
    expect(infos.map((l) => l.fields.redelivered)).toEqual([60]);
    const events = infos[0]!.fields.events as Array<{ eventId: string; outcome: string }>;
    expect(events).toHaveLength(50);
    expect(events.every((e) => e.outcome === "applied")).toBe(true);
    expect(new Set(events.map((e) => e.eventId)).size).toBe(50);
  });
});
