/**
 * The outbox relay's Prometheus metrics and health() against the real broker and real
 * databases: the pending gauge and the oldest row's age before the relay publishes, the
 * published count after, and an unroutable row counted as a failure that stays pending.
 */
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OutboxRelay } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { amqpUrl } from "../support/broker.js";
import {
  ExchangeTap, type OutboxTestDatabase, type OutboxTestStore, createOutboxDatabase, declareExchanges, deleteExchanges, eventually, randomExchangeName,
} from "../support/outbox.js";
import { parsePrometheusText, sampleValue } from "../support/prometheus-text.js";
import { TEST_DATABASES } from "../support/test-databases.js";

describe.each(TEST_DATABASES)("outbox relay metrics on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  const exchanges: string[] = [];
  const closers: Array<() => Promise<unknown>> = [];

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
  });

  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
    await store.close();
    await deleteExchanges(...exchanges.splice(0));
    await db.remove();
  });

  it("reports the pending rows before publishing, the confirmed ones after, and an unroutable row as a failure still pending", async () => {
    const bound = randomExchangeName();
    const unbound = randomExchangeName();
    exchanges.push(bound, unbound);
    const tap = await ExchangeTap.open(bound);
    closers.push(() => tap.close());
    await declareExchanges(unbound);
    await store.outbox.transaction(async (_tx, publish) => {
      for (let i = 0; i < 3; i++) await publish(bound, "k", { i });
    });

    const registry = new Registry();
    const relay = new OutboxRelay({
      url: amqpUrl, store, logger: silentLogger, pollIntervalMs: 100, cleanupIntervalMs: 0, retryBaseDelayMs: 60_000,
      metrics: { registry, sampleIntervalMs: 1 },
    });
    closers.push(() => relay.stop());
    const scrape = async () => parsePrometheusText(await registry.metrics());

    let s = await scrape();
    expect(sampleValue(s, "rabbit_inbox_outbox_pending")).toBe(3);
    expect(sampleValue(s, "rabbit_inbox_outbox_oldest_pending_age_seconds")).toBeGreaterThanOrEqual(0);
    expect(sampleValue(s, "rabbit_inbox_outbox_published_total")).toBe(0);
    expect(await relay.health()).toMatchObject({ state: "idle", connected: false, lastPublishAt: null, backlog: { pending: 3 } });

    await relay.start();
    await tap.waitForCount(3);
    await eventually(async () => (sampleValue(await scrape(), "rabbit_inbox_outbox_pending") === 0 ? true : undefined), "pending back to 0");
    s = await scrape();
    expect(sampleValue(s, "rabbit_inbox_outbox_published_total")).toBe(3);
    expect(sampleValue(s, "rabbit_inbox_outbox_publish_failures_total")).toBe(0);
    expect(sampleValue(s, "rabbit_inbox_outbox_oldest_pending_age_seconds")).toBe(0);
    expect(sampleValue(s, "rabbit_inbox_broker_connected", { role: "relay" })).toBe(1);
    const health = await relay.health();
    expect(health).toMatchObject({ state: "running", connected: true, backlog: { pending: 0, oldestPendingAgeSeconds: 0 }, counts: { published: 3, failed: 0 } });
    expect(health.lastPublishAt).toBeInstanceOf(Date);

    // Nothing is bound to this exchange: the broker returns the message, the row stays pending.
    await store.outbox.transaction(async (_tx, publish) => { await publish(unbound, "k", { lost: false }); });
    relay.wake();
    await eventually(async () => (sampleValue(await scrape(), "rabbit_inbox_outbox_publish_failures_total") === 1 ? true : undefined), "the failure counted");
    s = await scrape();
    expect(sampleValue(s, "rabbit_inbox_outbox_published_total")).toBe(3);
    expect(sampleValue(s, "rabbit_inbox_outbox_pending")).toBe(1);
    expect(tap.messages).toHaveLength(3);

    await relay.stop();
    expect(sampleValue(await scrape(), "rabbit_inbox_outbox_pending")).toBeUndefined();
  });
});
