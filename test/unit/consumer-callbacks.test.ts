/**
 * The application's callbacks (onOutcome, the failure-window hook after the ack, the metrics on
 * its registry) run inside the consumer's settling, but what they throw stays with them: it is
 * logged (repeats counted, not written each time) and the batch's acks go out as decided.
 * Before, a throw there failed the batch's settling, whose failure handler closed the channels:
 * acks already queued for committed deliveries were lost, the broker redelivered them, and an
 * always-throwing callback turned every batch into a reconnect and a round of duplicates.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { MetricsRegistry } from "../../src/observability/inbox-metrics.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { ackFrames, brokerClosedChannels, type fakeConsumer, settleTurns, until, fakeBrokerPerTest } from "../support/fake-consumer.js";
import { logged } from "../support/recording-logger.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

const env = fakeBrokerPerTest();
let broker: FakeBroker;
beforeEach(() => {
  broker = env.broker;
});

/**
 * A registry whose every metric throws when counted or observed once the consumer is running (as
 * one whose metric of the same name another library replaced could); making the consumer works.
 */
function throwingRegistry(): MetricsRegistry {
  let running = false;
  const counted = () => { if (running) throw new Error("metric is broken"); };
  const metric = { labels: () => ({ inc: counted, observe: counted }), inc: counted, observe: counted, set: counted, reset: counted };
  setImmediate(() => { running = true; });
  return { getSingleMetric: () => metric, removeSingleMetric: () => undefined, registerMetric: () => undefined, metrics: () => Promise.resolve("") };
}

const callbacks: Array<[string, () => Parameters<typeof fakeConsumer>[1], string]> = [
  ["an onOutcome that always throws", () => ({ onOutcome: () => { throw new Error("dashboard down"); } }), "onOutcome threw; ignored"],
  ["an after-ack hook that always rejects", () => ({ hook: (point) => (point === "after-ack" ? Promise.reject(new Error("drill broke")) : undefined) }), "the after-ack hook threw; ignored"],
  ["metrics that always throw", () => ({ metrics: { registry: throwingRegistry() } }), "a metric threw; ignored"],
];

describe.each(callbacks)("%s", (_what, options, line) => {
  it("changes nothing on the broker: every delivery acked once, no channel closed, no reconnect, no redelivery", async () => {
    const { consumer, store, lines } = env.build({ batchSize: 5, ...options() });
    await consumer.start();
    // Start-up closes its topology channels; after that, no channel may close.
    const closedAtStart = broker.framesOf("channel-close");
    for (let i = 1; i <= 20; i++) broker.publishJson("work", { tenant: "t1", event_id: `e-${i}` });
    await until(() => broker.depth("work").ready === 0 && broker.depth("work").unacked === 0, "every delivery acked");
    await settleTurns();

    expect(store.effects).toEqual(Array.from({ length: 20 }, (_, i) => `e-${i + 1}`));
    expect(consumer.outcomeCounts).toMatchObject({ applied: 20, duplicate: 0, requeue: 0 });
    expect(broker.framesOf("channel-close")).toEqual(closedAtStart);
    expect(brokerClosedChannels(broker)).toEqual([]);
    expect(broker.connections).toHaveLength(1);
    expect(broker.framesOf("consume")).toHaveLength(1);
    expect(broker.framesOf("nack")).toEqual([]);
    const acked = ackFrames(broker);
    expect(Math.max(...acked.map((a) => a.tag))).toBe(20);
    expect(consumer.health()).toMatchObject({ state: "running", connected: true });
    // Said once, then counted: not one line per batch.
    expect(logged(lines, line)).toHaveLength(1);
    expect(logged(lines, line)[0]!.level).toBe("error");
    expect(logged(lines, "unexpected failure settling a batch; closing its channels so the broker redelivers")).toEqual([]);
    await consumer.stop();
  });
});
