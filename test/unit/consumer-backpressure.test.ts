/**
 * The consumer under backpressure, over the in-memory broker: while the Backpressure says pause,
 * no batch starts, what the consumer holds stays unacked (and is never nacked or given back), and
 * the broker keeps the rest; once it says go on, everything is applied in order and acked once.
 * Its health and its metrics say it is paused; stop() while paused ends, finishing what it holds.
 */
import { Registry } from "prom-client";
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { Backpressure } from "../../src/core/backpressure.js";
import { InboxConfigError } from "../../src/core/errors.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { ackFrames, brokerClosedChannels, fakeBrokerPerTest, settleTurns, until } from "../support/fake-consumer.js";
import { parsePrometheusText, sampleValue } from "../support/prometheus-text.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

/** A Backpressure the test switches; it counts the checks it answered. */
function switchable(pause = false) {
  const state = { pause, checks: 0 };
  const backpressure: Backpressure = {
    name: "test backlog", checkIntervalMs: 5,
    check() {
      state.checks++;
      return Promise.resolve({ pause: state.pause, detail: { pending: state.pause ? 100 : 0 } });
    },
  };
  return { state, backpressure };
}

const event = (n: number) => ({ tenant: "t1", event_id: `e-${n}` });
const ids = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `e-${from + i}`);
const paused = async (registry: Registry) => sampleValue(parsePrometheusText(await registry.metrics()), "rabbit_inbox_consumer_paused", { queue: "work" });

describe("a consumer with backpressure", () => {
  it("starts no batch while paused, holds its deliveries unacked, and applies them in order once it may go on", async () => {
    const { state, backpressure } = switchable(true);
    const registry = new Registry();
    const { consumer, store, lines } = env.build({ batchSize: 5, prefetch: 20, backpressure, metrics: { registry } });
    await consumer.start();
    expect(await paused(registry)).toBe(0);
    for (let n = 1; n <= 30; n++) broker.publishJson("work", event(n));

    // The first batch starts before the first check answers; after it, nothing.
    await until(() => consumer.health().backpressure?.paused === true, "the pause");
    await settleTurns(50);
    expect(store.effects).toEqual(ids(1, 5));
    // A prefetch's worth held (the first batch's ack let 5 more in), the rest on the broker.
    expect(broker.depth("work")).toEqual({ ready: 5, unacked: 20 });
    expect(ackFrames(broker).map((f) => f.tag)).toEqual([5]);
    expect(broker.framesOf("nack")).toEqual([]);
    expect(consumer.health()).toMatchObject({ consuming: true, backpressure: { name: "test backlog", paused: true, detail: { pending: 100 } } });
    expect(consumer.health().backpressure!.pausedSince).toBeInstanceOf(Date);
    expect(await paused(registry)).toBe(1);
    expect(lines.filter((l) => l.level === "warn").map((l) => l.message)).toEqual(["test backlog over its bound: no new batch starts until it comes down (deliveries held stay unacked)"]);
    // It keeps asking while paused.
    const checks = state.checks;
    await until(() => state.checks >= checks + 2, "two more checks");

    state.pause = false;
    await until(() => store.effects.length === 30, "every event applied");
    await settleTurns();
    expect(store.effects).toEqual(ids(1, 30));
    expect(broker.depth("work")).toEqual({ ready: 0, unacked: 0 });
    expect(broker.framesOf("nack")).toEqual([]);
    expect(brokerClosedChannels(broker)).toEqual([]);
    expect(consumer.outcomeCounts).toMatchObject({ applied: 30, requeue: 0 });
    expect(consumer.health().backpressure).toMatchObject({ paused: false, pausedSince: null });
    expect(await paused(registry)).toBe(0);
    expect(lines.some((l) => l.level === "info" && l.message === "test backlog back under its bound: consumption resumes")).toBe(true);
  });

  it("stop() while paused applies and acks what it holds, takes nothing more, and asks no more", async () => {
    const { state, backpressure } = switchable(true);
    const { consumer, store } = env.build({ batchSize: 5, prefetch: 20, backpressure });
    await consumer.start();
    for (let n = 1; n <= 30; n++) broker.publishJson("work", event(n));
    await until(() => consumer.health().backpressure?.paused === true, "the pause");
    await until(() => ackFrames(broker).length === 1 && broker.depth("work").unacked === 20, "the first batch acked, and a prefetch's worth held");

    await consumer.stop();
    expect(store.effects).toEqual(ids(1, 25));
    expect(broker.depth("work")).toEqual({ ready: 5, unacked: 0 });
    expect(broker.framesOf("nack")).toEqual([]);
    expect(consumer.outcomeCounts).toMatchObject({ applied: 25, requeue: 0 });
    const checks = state.checks;
    await settleTurns(50);
    expect(state.checks).toBe(checks);
  });

  it("stop() does not wait for a check that never answers (a database that hangs)", async () => {
    let checks = 0;
    const backpressure: Backpressure = {
      name: "test backlog", checkIntervalMs: 5,
      check: () => (++checks === 1 ? Promise.resolve({ pause: true, detail: {} }) : new Promise(() => undefined)),
    };
    const { consumer, store, lines } = env.build({ batchSize: 5, prefetch: 20, backpressure });
    await consumer.start();
    for (let n = 1; n <= 10; n++) broker.publishJson("work", event(n));
    await until(() => checks >= 2, "a check that hangs");
    await consumer.stop();
    expect(store.effects).toEqual(ids(1, 10));
    expect(broker.depth("work")).toEqual({ ready: 0, unacked: 0 });
    expect(lines.filter((l) => l.level === "error")).toEqual([]);
  });

  it("never pauses while the backpressure says go on, and asks it at most once per interval", async () => {
    const { state, backpressure } = switchable(false);
    const slow = { ...backpressure, checkIntervalMs: 60_000 };
    const { consumer, store } = env.build({ batchSize: 2, prefetch: 20, backpressure: slow });
    await consumer.start();
    for (let n = 1; n <= 20; n++) broker.publishJson("work", event(n));
    await until(() => store.effects.length === 20, "every event applied");
    expect(state.checks).toBe(1);
    expect(consumer.health().backpressure).toMatchObject({ paused: false, detail: { pending: 0 } });
  });

  it("has no backpressure in health() nor a paused gauge without the option", async () => {
    const registry = new Registry();
    const { consumer } = env.build({ metrics: { registry } });
    await consumer.start();
    expect(consumer.health()).not.toHaveProperty("backpressure");
    expect(await paused(registry)).toBeUndefined();
  });

  it("refuses a backpressure without a check() or an interval", () => {
    expect(() => env.build({ backpressure: {} as Backpressure })).toThrow(InboxConfigError);
    expect(() => env.build({ backpressure: { name: "x", checkIntervalMs: 5 } as Backpressure })).toThrow("backpressure must have a check() function (e.g. outboxBackpressure({ store }))");
    expect(() => env.build({ backpressure: { name: "x", checkIntervalMs: 0, check: () => Promise.resolve({ pause: false, detail: {} }) } }))
      .toThrow("backpressure.checkIntervalMs must be a number from 1 to 2147483647, got 0");
  });
});
