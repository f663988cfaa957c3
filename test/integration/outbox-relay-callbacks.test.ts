/**
 * The relay's application callbacks, through the real broker: an `onPublished` that always
 * throws, and metrics on a registry whose metrics always throw. What they throw is logged once
 * (then counted) and ignored: every row is published once and marked sent in its round. Before,
 * the throw failed the round after its rows were confirmed: the relay logged "cannot claim rows"
 * and backed off after every round.
 */
import { afterEach, describe, expect, it } from "vitest";
import { OutboxRelay } from "../../src/index.js";
import type { MetricsRegistry } from "../../src/observability/inbox-metrics.js";
import { amqpUrl } from "../support/broker.js";
import { ExchangeTap, createOutboxDatabase, deleteExchanges, randomExchangeName, sleep } from "../support/outbox.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";
import { onSelectedDatabases } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

/** Every metric of this registry throws once counting starts (construction works). */
function throwingRegistry(): { registry: MetricsRegistry; breakNow: () => void } {
  let broken = false;
  const counted = () => { if (broken) throw new Error("metric is broken"); };
  const metric = { labels: () => ({ inc: counted, observe: counted }), inc: counted, observe: counted, set: counted, reset: counted };
  return {
    registry: { getSingleMetric: () => metric, removeSingleMetric: () => undefined, registerMetric: () => undefined, metrics: () => Promise.resolve("") },
    breakNow: () => { broken = true; },
  };
}

describe.each(onSelectedDatabases(["sqlite", "postgres"] as const))("the relay's callbacks on %s", (kind) => {
  it.each([
    ["an onPublished that always throws", "onPublished threw; ignored"],
    ["metrics that always throw", "a metric threw; ignored"],
  ])("%s: every row published once and marked sent; one error line, no failed round", async (what, line) => {
    const db = await createOutboxDatabase(kind);
    cleanups.push(() => db.remove());
    const store = await db.open();
    cleanups.push(() => store.close());
    await store.migrate();
    const exchange = randomExchangeName("relay.callbacks");
    const tap = await ExchangeTap.open(exchange);
    cleanups.push(() => deleteExchanges(exchange), () => tap.close());
    const lines: LogLine[] = [];
    const metrics = throwingRegistry();
    const relay = new OutboxRelay({
      url: amqpUrl, store, logger: recordingLogger(lines), pollIntervalMs: 50, cleanupIntervalMs: 0, batchSize: 5,
      ...(what.startsWith("metrics") ? { metrics: { registry: metrics.registry } } : { onPublished: () => { throw new Error("dashboard down"); } }),
    });
    cleanups.push(() => relay.stop());
    metrics.breakNow();
    await relay.start();
    for (let i = 0; i < 4; i++) {
      await store.outbox.transaction(async (_tx, publish) => {
        for (let j = 0; j < 5; j++) await publish(exchange, "k", { i, j });
      });
    }
    await tap.waitForCount(20);
    const deadline = Date.now() + 10_000;
    while (!(await db.rows()).every((r) => r.sent) && Date.now() < deadline) await sleep(20);
    // Each sent at its first attempt: no round failed and had its rows published again.
    expect((await db.rows()).map((r) => [r.sent, r.attempts])).toEqual(Array.from({ length: 20 }, () => [true, 1]));
    expect([...tap.countsById().values()]).toEqual(Array.from({ length: 20 }, () => 1));
    expect(logged(lines, "outbox relay cannot claim rows; retrying")).toEqual([]);
    expect(logged(lines, line)).toHaveLength(1);
  });
});
