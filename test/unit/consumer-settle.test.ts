/**
 * The consumer's settle rules, frame by frame, over an in-memory broker: what it acks, on
 * which channel, in which order relative to commits and publisher confirms, and what it never
 * sends. The same rules are exercised against RabbitMQ by the integration tests; here every
 * frame is visible, so a one-line slip (an ack before a confirm, an ack of a nacked message,
 * a multiple ack over another batch's tags) fails at once.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import { RetryLaterError } from "../../src/core/errors.js";
import type { Outcome } from "../../src/core/outcome.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { ackFrames, brokerClosedChannels, type fakeConsumer, settleTurns, until, fakeBrokerPerTest, givenBackChannels } from "../support/fake-consumer.js";
import { type LogLine } from "../support/recording-logger.js";
import { MemoryStore, unreachableStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

const start = (options: Parameters<typeof fakeConsumer>[1] = {}) => env.build(options);

const event = (eventId: string, extra: Record<string, unknown> = {}) => ({ tenant: "t1", event_id: eventId, ...extra });
const messages = (lines: readonly LogLine[], level: LogLine["level"]) => lines.filter((l) => l.level === level).map((l) => l.message);

describe("acks", () => {
  it("acks a batch once, with one multiple ack on the consuming channel, after the transaction committed", async () => {
    const committedBeforeAck: number[] = [];
    const store = new MemoryStore();
    const original = store.transaction.bind(store);
    store.transaction = async (work, beforeCommit) => {
      const result = await original(work, beforeCommit);
      committedBeforeAck.push(ackFrames(broker).length);
      return result;
    };
    const { consumer } = start({ store, batchSize: 10 });
    await consumer.start();
    for (let i = 1; i <= 10; i++) broker.publishJson("work", event(`e-${i}`));
    await until(() => ackFrames(broker).length > 0, "the ack");
    await settleTurns();

    expect(store.effects).toEqual(Array.from({ length: 10 }, (_, i) => `e-${i + 1}`));
    // No ack went out before its transaction committed.
    expect(committedBeforeAck).toEqual([0]);
    const consume = broker.framesOf("consume");
    expect(consume).toHaveLength(1);
    expect(ackFrames(broker)).toEqual([{ op: "ack", connection: consume[0]!.connection, channel: consume[0]!.channel, tag: 10, multiple: true }]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(brokerClosedChannels(broker)).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 0, unacked: 0 });
    expect(consumer.outcomeCounts).toEqual({ applied: 10, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 });
  });

  it("asks the broker for twice the batch size (at least 200) unless told, and takes an explicit prefetch", async () => {
    const small = start({ batchSize: 10, queue: "q-small" });
    await small.consumer.start();
    const big = start({ batchSize: 400, queue: "q-big" });
    await big.consumer.start();
    const defaults = start({ queue: "q-default" });
    await defaults.consumer.start();
    const explicit = start({ prefetch: 7, queue: "q-explicit" });
    await explicit.consumer.start();
    expect(broker.framesOf("consume").map((f) => [f.queue, f.prefetch])).toEqual([["q-small", 200], ["q-big", 800], ["q-default", 1000], ["q-explicit", 7]]);
  });

  it("settles a duplicate by acking it, without a second effect", async () => {
    const { consumer, store } = start();
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => ackFrames(broker).length === 1, "the first ack");
    broker.publishJson("work", event("e-1"));
    await until(() => ackFrames(broker).length === 2, "the duplicate's ack");
    expect(store.effects).toEqual(["e-1"]);
    expect(consumer.outcomeCounts.duplicate).toBe(1);
    expect(ackFrames(broker).map((f) => [f.tag, f.multiple])).toEqual([[1, false], [2, false]]);
    expect(brokerClosedChannels(broker)).toEqual([]);
  });

  it("reports each settled delivery to onOutcome with its latency", async () => {
    const seen: Array<[Outcome["kind"], number]> = [];
    const { consumer } = start({ onOutcome: (o, t) => seen.push([o.kind, t.latencyMs]) });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    broker.publishJson("work", event("e-1"));
    await until(() => seen.length === 2, "two outcomes");
    expect(seen.map(([kind]) => kind).sort()).toEqual(["applied", "duplicate"]);
    for (const [, latency] of seen) {
      expect(latency).toBeGreaterThanOrEqual(0);
      expect(latency).toBeLessThan(2000);
    }
  });

  it("never acks over a tag another batch still holds: a later batch that finishes first is acked tag by tag", async () => {
    // Two transactions at once: the first waits until the second has committed and been acked.
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => { releaseFirst = resolve; });
    const store = new MemoryStore();
    Object.defineProperty(store, "maxConcurrentTransactions", { value: 2 });
    const { consumer } = start({
      store, batchSize: 3, concurrency: 2,
      handler: {
        name: "held",
        async handle(e, ctx) {
          if (e.event_id === "e-1") await firstHeld;
          ctx.tx.effects.push(e.event_id);
        },
      },
    });
    await consumer.start();
    for (let i = 1; i <= 6; i++) broker.publishJson("work", event(`e-${i}`));
    await until(() => ackFrames(broker).length > 0, "the second batch's acks");
    await settleTurns();
    // Tags 4..6 are acked one by one: a multiple ack up to 6 would settle 1..3, still in flight.
    expect(ackFrames(broker).map((f) => [f.tag, f.multiple])).toEqual([[4, false], [5, false], [6, false]]);
    releaseFirst();
    await until(() => ackFrames(broker).length === 4, "the first batch's ack");
    expect(ackFrames(broker).slice(3).map((f) => [f.tag, f.multiple])).toEqual([[3, true]]);
    expect(brokerClosedChannels(broker)).toEqual([]);
    expect(broker.depth("work")).toEqual({ ready: 0, unacked: 0 });
  });
});

describe("quarantine", () => {
  it("publishes the quarantine copy with confirms and what an operator needs, and acks the original only after the confirm", async () => {
    const { consumer, store, lines } = start();
    await consumer.start();
    broker.publishJson("work", event("e-1", { amount: 1 }));
    await until(() => ackFrames(broker).length === 1, "the first ack");
    broker.publishJson("work", event("e-1", { amount: 2 }), {
      messageId: "m-2", timestamp: 1_700_000_000, type: "adjusted", contentEncoding: "identity",
      headers: { "x-custom": "kept" },
    });
    await until(() => ackFrames(broker).length === 2, "the conflict's ack");

    const copies = broker.framesOf("publish").filter((f) => f.routingKey === "work.quarantine");
    expect(copies).toHaveLength(1);
    const copy = copies[0]!;
    expect(copy.exchange).toBe("");
    expect(JSON.parse(copy.content.toString())).toEqual(event("e-1", { amount: 2 }));
    expect(copy.properties).toMatchObject({
      persistent: true, contentType: "application/json", messageId: "m-2", timestamp: 1_700_000_000, type: "adjusted", contentEncoding: "identity",
    });
    const headers = copy.properties.headers as Record<string, unknown>;
    expect(headers).toMatchObject({
      "x-custom": "kept",
      "x-rabbit-inbox-reason": "conflict",
      "x-rabbit-inbox-handler": "fake-consumer",
      "x-rabbit-inbox-original-queue": "work",
      "x-rabbit-inbox-tenant": "t1",
      "x-rabbit-inbox-event-id": "e-1",
    });
    expect(headers["x-rabbit-inbox-fingerprint"]).toMatch(/^[0-9a-f]{16,}/);
    expect(headers["x-rabbit-inbox-stored-fingerprint"]).toMatch(/^[0-9a-f]{16,}/);
    expect(headers["x-rabbit-inbox-fingerprint"]).not.toBe(headers["x-rabbit-inbox-stored-fingerprint"]);
    expect(String(headers["x-rabbit-inbox-detail"])).toContain("e-1");

    // Order on the wire: the copy, its confirm, then the original's ack.
    const order = broker.frames.filter((f) => f.op === "publish" || f.op === "confirm" || f.op === "ack").map((f) => f.op);
    expect(order).toEqual(["ack", "publish", "confirm", "ack"]);
    expect(broker.depth("work.quarantine").ready).toBe(1);
    expect(store.effects).toEqual(["e-1"]);
    expect(store.quarantined.map((r) => r.reason)).toEqual(["conflict"]);
    expect(consumer.outcomeCounts.quarantined).toBe(1);
    expect(lines.find((l) => l.message === "event quarantined")?.fields).toMatchObject({ reason: "conflict", tenant: "t1", eventId: "e-1", quarantineQueue: "work.quarantine" });
  });

  it("quarantines a malformed body without a key, and names the reason", async () => {
    const { consumer } = start();
    await consumer.start();
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => ackFrames(broker).length === 1, "the ack");
    const copy = broker.framesOf("publish").find((f) => f.routingKey === "work.quarantine")!;
    const headers = copy.properties.headers as Record<string, unknown>;
    expect(headers["x-rabbit-inbox-reason"]).toBe("invalid");
    expect(headers).not.toHaveProperty("x-rabbit-inbox-tenant");
    expect(headers).not.toHaveProperty("x-rabbit-inbox-event-id");
    expect(copy.content.toString()).toBe("{not json");
  });

  it("does not ack an original whose quarantine copy the broker refused: it is given back and quarantined once on its return", async () => {
    let refusals = 1;
    broker.confirmPolicy = (routingKey) => !(routingKey === "work.quarantine" && refusals-- > 0);
    const { consumer, lines } = start();
    await consumer.start();
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => ackFrames(broker).length === 1, "the ack of the redelivery");
    // The refused copy's original (tag 1) was given back, never acked; its redelivery (tag 2)
    // was acked after its own copy was confirmed.
    const settles = broker.frames.filter((f) => f.op === "ack" || f.op === "nack" || f.op === "confirm").map((f) => (f.op === "confirm" ? `confirm ${f.ok}` : `${f.op} ${f.tag}${f.multiple ? "+" : ""}`));
    expect(settles).toEqual(["confirm false", "nack 1", "confirm true", "ack 2"]);
    expect(broker.framesOf("nack")[0]).toMatchObject({ requeue: true });
    expect(messages(lines, "error")).toContain("quarantine publish not confirmed; the original stays unacked and comes back");
    expect(consumer.outcomeCounts).toMatchObject({ requeue: 1, quarantined: 1 });
    expect(brokerClosedChannels(broker)).toEqual([]);
  });

  it("does not ack an original whose quarantine confirm never comes, after confirmTimeoutMs", async () => {
    broker.confirmPolicy = (routingKey) => (routingKey === "work.quarantine" ? "hold" : true);
    const { consumer } = start({ confirmTimeoutMs: 30 });
    await consumer.start();
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => broker.framesOf("nack").length >= 1, "the nack");
    expect(ackFrames(broker)).toEqual([]);
  });

  it("does not ack an original whose quarantine copy was unroutable (its queue is gone)", async () => {
    const { consumer } = start();
    await consumer.start();
    broker.queues.delete("work.quarantine");
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => broker.framesOf("nack").length >= 1, "the nack");
    expect(ackFrames(broker)).toEqual([]);
    expect(broker.framesOf("confirm")[0]!.ok).toBe(true);
  });
});

describe("delayed retries", () => {
  function retryLaterHandler(until: { ready: boolean }) {
    return {
      name: "fake-consumer",
      handle(e: { event_id: string }, ctx: { tx: { effects: string[] } }) {
        if (!until.ready) throw new RetryLaterError("account_missing", `account of ${e.event_id} not opened yet`);
        ctx.tx.effects.push(e.event_id);
        return Promise.resolve();
      },
    };
  }

  it("sends an event through each delay queue with a confirmed copy, then quarantines it with the handler's reason", async () => {
    const { consumer, store, lines } = start({ retryDelaysMs: [5, 10], handler: retryLaterHandler({ ready: false }) });
    await consumer.start();
    expect(broker.queue("work.retry.1").arguments).toEqual({ "x-message-ttl": 5, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work" });
    expect(broker.queue("work.retry.2").arguments).toMatchObject({ "x-message-ttl": 10 });
    broker.publishJson("work", event("e-1"), { timestamp: 1_700_000_000, messageId: "m-1", type: "adjusted", contentEncoding: "identity" });
    // Outcomes are counted as soon as their acks are queued; the acks go out a turn later.
    await until(() => consumer.outcomeCounts.quarantined === 1 && ackFrames(broker).length === 3, "the quarantine and its ack");

    const publishes = broker.framesOf("publish").map((f) => f.routingKey);
    expect(publishes).toEqual(["work.retry.1", "work.retry.2", "work.quarantine"]);
    const [first, second, last] = broker.framesOf("publish");
    // Each copy keeps the original's properties, so the quarantined one still says what it was.
    for (const copy of [first!, second!, last!]) {
      expect(copy.properties).toMatchObject({ persistent: true, messageId: "m-1", timestamp: 1_700_000_000, contentType: "application/json", type: "adjusted", contentEncoding: "identity" });
    }
    expect((first!.properties.headers as Record<string, unknown>)["x-rabbit-inbox-retry"]).toBe(1);
    expect(String((first!.properties.headers as Record<string, unknown>)["x-rabbit-inbox-last-error"])).toContain("not opened yet");
    expect((second!.properties.headers as Record<string, unknown>)["x-rabbit-inbox-retry"]).toBe(2);
    expect((last!.properties.headers as Record<string, unknown>)["x-rabbit-inbox-reason"]).toBe("account_missing");
    // Each original was acked only after its copy's confirm.
    const order = broker.frames.filter((f) => f.op === "confirm" || f.op === "ack").map((f) => f.op);
    expect(order).toEqual(["confirm", "ack", "confirm", "ack", "confirm", "ack"]);
    expect(consumer.outcomeCounts).toMatchObject({ delayed: 2, quarantined: 1, applied: 0 });
    expect(store.effects).toEqual([]);
    const scheduled = lines.filter((l) => l.message === "delayed retry scheduled").map((l) => [l.fields.attempt, l.fields.delayMs, l.fields.retryQueue]);
    expect(scheduled).toEqual([[1, 5, "work.retry.1"], [2, 10, "work.retry.2"]]);
    expect(brokerClosedChannels(broker)).toEqual([]);
  });

  it("applies the event when it comes back from a delay queue and can apply", async () => {
    const state = { ready: false };
    const { consumer, store } = start({ retryDelaysMs: [30], handler: retryLaterHandler(state) });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => consumer.outcomeCounts.delayed === 1, "the delay");
    state.ready = true;
    await until(() => consumer.outcomeCounts.applied === 1, "the apply");
    expect(store.effects).toEqual(["e-1"]);
    expect(broker.framesOf("publish").map((f) => f.routingKey)).toEqual(["work.retry.1"]);
  });

  it("does not ack an original whose delayed-retry copy the broker refused", async () => {
    let refuse = true;
    broker.confirmPolicy = (routingKey) => !(refuse && routingKey === "work.retry.1");
    const state = { ready: false };
    const { consumer, lines } = start({ retryDelaysMs: [5], handler: retryLaterHandler(state) });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => broker.framesOf("nack").length >= 1, "the nack");
    expect(ackFrames(broker)).toEqual([]);
    expect(messages(lines, "error")).toContain("delayed-retry publish not confirmed; the original stays unacked and comes back");
    refuse = false;
    state.ready = true;
    await until(() => consumer.outcomeCounts.applied === 1, "the apply");
    expect(broker.framesOf("publish").filter((f) => f.routingKey === "work.quarantine")).toEqual([]);
  });

  it("gives a message whose producer set the retry header its whole budget (the header is believed only after that delay queue)", async () => {
    const { consumer } = start({ retryDelaysMs: [5], handler: retryLaterHandler({ ready: false }) });
    await consumer.start();
    broker.publishJson("work", event("e-1"), { headers: { "x-rabbit-inbox-retry": 1 } });
    await until(() => consumer.outcomeCounts.quarantined === 1, "the quarantine");
    expect(broker.framesOf("publish").map((f) => f.routingKey)).toEqual(["work.retry.1", "work.quarantine"]);
  });
});

describe("a database that does not answer", () => {
  it("gives deliveries back by closing their channel (never a nack), never acks, delays or quarantines them, and applies them once it is back", async () => {
    const db = unreachableStore("PostgreSQL connection lost: connect ECONNREFUSED 127.0.0.1:5432");
    const { store } = db;
    const { consumer, lines } = start({ store, retryDelaysMs: [5] });
    await consumer.start();
    broker.publishJson("work", event("e-1"));
    await until(() => givenBackChannels(broker).length >= 2, "two give-backs");
    expect(ackFrames(broker)).toEqual([]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(broker.framesOf("publish")).toEqual([]);
    expect(messages(lines, "error")).toContain("database unavailable after retries; deliveries go back to the broker");
    db.down = false;
    await until(() => consumer.outcomeCounts.applied === 1, "the apply");
    expect(store.effects).toEqual(["e-1"]);
    expect(consumer.outcomeCounts.quarantined + consumer.outcomeCounts.delayed).toBe(0);
    expect(brokerClosedChannels(broker)).toEqual([]);
  });
});
