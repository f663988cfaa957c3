/**
 * The metrics seam: the no-op set when no registry is given, the prom-client set's counters,
 * histograms and scraped gauges on a real Registry (read back through the text format), two
 * consumers sharing one registry, and the rate limit of the gauges that cost a query.
 */
import { readFileSync } from "node:fs";
import type { Meter } from "@opentelemetry/api";
import { Registry } from "prom-client";
import { describe, expect, it, vi } from "vitest";
import { InboxConfigError, InboxConsumer, OutboxRelay } from "../../src/index.js";
import type { Outcome } from "../../src/core/outcome.js";
import { silentLogger } from "../../src/core/logger.js";
import { MemoryStore } from "../support/memory-store.js";
import { noConsumerMetrics, noRelayMetrics } from "../../src/observability/inbox-metrics.js";
import { consumerMetricsFor, relayMetricsFor } from "../../src/observability/metrics-for.js";
import { otelConsumerMetrics } from "../../src/observability/otel-consumer-metrics.js";
import { otelRelayMetrics } from "../../src/observability/otel-relay-metrics.js";
import { promConsumerMetrics } from "../../src/observability/prom-consumer-metrics.js";
import { promRelayMetrics } from "../../src/observability/prom-relay-metrics.js";
import { RateLimitedSample } from "../../src/observability/rate-limited-sample.js";
import type { OutboxBacklog } from "../../src/core/store-contract/outbox-admin.js";
import { parsePrometheusText, sampleValue } from "../support/prometheus-text.js";

const key = { tenant: "t1", eventId: "e1" };
const record = {} as Extract<Outcome, { kind: "quarantined" }>["record"];

function delivery(receivedAt: number, redelivered = false) {
  return { receivedAt, message: { fields: { redelivered } } };
}

async function scrape(registry: Registry) {
  return parsePrometheusText(await registry.metrics());
}

describe("the metrics seam", () => {
  it("is the no-op set without a registry, and registers nothing anywhere", () => {
    const registry = new Registry();
    expect(consumerMetricsFor(undefined, { queue: "q", handler: { name: "h" }, store: {}, partitioned: true, node: () => "n", partitionsHeld: () => 1 })).toBe(noConsumerMetrics);
    expect(relayMetricsFor(undefined, { node: () => "n" })).toBe(noRelayMetrics);
    expect(registry.getMetricsAsArray()).toEqual([]);
    expect(() => noConsumerMetrics.settled([delivery(0)], [{ kind: "applied", key }], 1)).not.toThrow();
  });

  it("counts outcomes, quarantine reasons, redeliveries, retries and latency per queue and handler", async () => {
    const registry = new Registry();
    const metrics = promConsumerMetrics({ registry }, { queue: "q1", handler: "h1", node: () => "127.0.0.1:5672" });
    metrics.settled(
      [delivery(0), delivery(0, true), delivery(500), delivery(900)],
      [
        { kind: "applied", key }, { kind: "duplicate", key },
        { kind: "quarantined", key: null, reason: "invalid", detail: "x", record }, { kind: "requeue", key, error: new Error("down") },
      ],
      1000,
    );
    metrics.transactionCommitted(0.02);
    metrics.transactionRetried("transient");
    metrics.transactionRetried("transient");
    const s = await scrape(registry);
    const labels = { queue: "q1", handler: "h1" };
    expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "applied" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "duplicate" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "quarantined" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "requeue" })).toBe(1);
    // Every outcome's series exists from the start, at 0: a rate() over it needs no first event.
    expect(sampleValue(s, "rabbit_inbox_messages_total", { ...labels, outcome: "delayed" })).toBe(0);
    expect(sampleValue(s, "rabbit_inbox_quarantined_total", { ...labels, reason: "invalid" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_redeliveries_total", labels)).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_transaction_retries_total", { ...labels, kind: "transient" })).toBe(2);
    expect(sampleValue(s, "rabbit_inbox_batch_size_count", labels)).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_batch_size_sum", labels)).toBe(4);
    expect(sampleValue(s, "rabbit_inbox_transaction_duration_seconds_count", labels)).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_settle_latency_seconds_count", labels)).toBe(4);
    expect(sampleValue(s, "rabbit_inbox_settle_latency_seconds_sum", labels)).toBeCloseTo(1 + 1 + 0.5 + 0.1, 6);
    // No label carries what came in a message: no tenant, no event id.
    expect(s.flatMap((x) => Object.keys(x.labels))).not.toContain("tenant");
    expect(s.map((x) => JSON.stringify(x.labels)).join()).not.toContain("e1");
  });

  it("shares the metrics of one registry between consumers, each under its own labels, and drops a closed one's gauges", async () => {
    const registry = new Registry();
    let nodeA: string | undefined = "node-a:5672";
    const a = promConsumerMetrics({ registry }, { queue: "qa", handler: "h", node: () => nodeA, partitionsHeld: () => 3 });
    const b = promConsumerMetrics({ registry }, { queue: "qb", handler: "h", node: () => "node-b:5672" });
    a.connected("node-a:5672");
    a.settled([delivery(0)], [{ kind: "applied", key }], 1);
    b.settled([delivery(0), delivery(0)], [{ kind: "applied", key }, { kind: "applied", key }], 1);
    let s = await scrape(registry);
    expect(sampleValue(s, "rabbit_inbox_messages_total", { queue: "qa", outcome: "applied" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_messages_total", { queue: "qb", outcome: "applied" })).toBe(2);
    expect(sampleValue(s, "rabbit_inbox_broker_connected", { role: "consumer", queue: "qa", node: "node-a:5672" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_partitions_held", { queue: "qa" })).toBe(3);
    expect(sampleValue(s, "rabbit_inbox_partitions_held", { queue: "qb" })).toBeUndefined();
    expect(sampleValue(s, "rabbit_inbox_reconnects_total", { role: "consumer", queue: "qa" })).toBe(0);

    // Lost, then back: connected reads 0 on the node it had, and the second connect is a reconnect.
    nodeA = undefined;
    s = await scrape(registry);
    expect(sampleValue(s, "rabbit_inbox_broker_connected", { queue: "qa", node: "node-a:5672" })).toBe(0);
    nodeA = "node-a:5672";
    a.connected("node-a:5672");
    s = await scrape(registry);
    expect(sampleValue(s, "rabbit_inbox_reconnects_total", { role: "consumer", queue: "qa" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_broker_connected", { queue: "qa", node: "node-a:5672" })).toBe(1);

    a.close();
    s = await scrape(registry);
    expect(sampleValue(s, "rabbit_inbox_broker_connected", { queue: "qa" })).toBeUndefined();
    expect(sampleValue(s, "rabbit_inbox_broker_connected", { queue: "qb" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_messages_total", { queue: "qa", outcome: "applied" })).toBe(1);
  });

  it("reads the quarantine held on scrape, at most once per sample interval, and only this handler's held entries", async () => {
    const registry = new Registry();
    const counts = vi.fn(() => Promise.resolve([
      { handler: "h", reason: "malformed", status: "held" as const, entries: 2, oldest: new Date() },
      { handler: "h", reason: "conflict", status: "held" as const, entries: 1, oldest: new Date() },
      { handler: "h", reason: "malformed", status: "discarded" as const, entries: 5, oldest: new Date() },
      { handler: "other", reason: "malformed", status: "held" as const, entries: 7, oldest: new Date() },
    ]));
    promConsumerMetrics({ registry, sampleIntervalMs: 60_000 }, { queue: "q", handler: "h", node: () => undefined, quarantineCounts: counts });
    for (let i = 0; i < 3; i++) expect(sampleValue(await scrape(registry), "rabbit_inbox_quarantine_held", { handler: "h" })).toBe(3);
    expect(counts).toHaveBeenCalledTimes(1);
  });

  it("leaves a gauge out of a scrape when its query fails, and keeps serving the others", async () => {
    const registry = new Registry();
    promConsumerMetrics({ registry }, { queue: "q", handler: "h", node: () => "n", quarantineCounts: () => Promise.reject(new Error("db down")) });
    const s = await scrape(registry);
    expect(sampleValue(s, "rabbit_inbox_quarantine_held")).toBeUndefined();
    expect(sampleValue(s, "rabbit_inbox_broker_connected", { node: "n" })).toBe(1);
  });

  it("counts the relay's publishes, failures and reconnects, and reads its backlog on scrape", async () => {
    const registry = new Registry();
    const backlog: OutboxBacklog = {
      pending: 4, oldestPendingAt: new Date("2026-01-01T00:00:00Z"), now: new Date("2026-01-01T00:01:30Z"), failing: 0, unroutable: 0, worst: null,
    };
    const read = vi.fn(() => Promise.resolve(backlog));
    const relay = promRelayMetrics({ registry }, { node: () => "127.0.0.1:5672", backlog: read });
    relay.published();
    relay.published();
    relay.publishFailed();
    relay.reconnected();
    const s = await scrape(registry);
    expect(sampleValue(s, "rabbit_inbox_outbox_published_total")).toBe(2);
    expect(sampleValue(s, "rabbit_inbox_outbox_publish_failures_total")).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_reconnects_total", { role: "relay" })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_outbox_pending")).toBe(4);
    expect(sampleValue(s, "rabbit_inbox_outbox_oldest_pending_age_seconds")).toBe(90);
    expect(sampleValue(s, "rabbit_inbox_broker_connected", { role: "relay", node: "127.0.0.1:5672" })).toBe(1);
  });
});

describe("a consumer or relay that never ran", () => {
  it("takes its gauges off the registry when its start fails, or when it is stopped before starting", async () => {
    const registry = new Registry();
    const url = "amqp://127.0.0.1:1";
    const consumer = new InboxConsumer({ url, queue: "q", store: new MemoryStore(), handler: { name: "h", handle: () => Promise.resolve() }, logger: silentLogger, metrics: { registry } });
    const store = Object.assign(new MemoryStore(), { claimOutbox: () => Promise.resolve(null) });
    const relay = new OutboxRelay({ url, store: store as never, logger: silentLogger, metrics: { registry } });
    expect(registry.getSingleMetric("rabbit_inbox_broker_connected")).toBeDefined();
    await expect(consumer.start()).rejects.toThrow();
    expect(registry.getSingleMetric("rabbit_inbox_broker_connected")).toBeDefined(); // the relay's is still there
    await relay.stop();
    expect(registry.getSingleMetric("rabbit_inbox_broker_connected")).toBeUndefined();
    // Counters stay: what was counted stays counted.
    expect(registry.getSingleMetric("rabbit_inbox_messages_total")).toBeDefined();
    await consumer.stop();
  });
});

describe("a consumer without a handler", () => {
  it("fails with the configuration error, not a TypeError from its metrics, and registers nothing", () => {
    const registry = new Registry();
    const options = { url: "amqp://127.0.0.1:1", queue: "q", store: new MemoryStore(), logger: silentLogger, metrics: { registry } };
    expect(() => new InboxConsumer({ ...options, handler: undefined as never })).toThrow(InboxConfigError);
    expect(registry.getMetricsAsArray()).toEqual([]);
  });
});

describe("the metrics' documentation", () => {
  it("names every metric and instrument the library makes, and the dashboard queries no other", () => {
    const registry = new Registry();
    promConsumerMetrics({ registry }, { queue: "q", handler: "h", node: () => "n", partitionsHeld: () => 0, paused: () => false, quarantineCounts: () => Promise.resolve([]) });
    promRelayMetrics({ registry }, { node: () => "n", backlog: () => Promise.reject(new Error("unused")) });
    const registered = new Set(registry.getMetricsAsArray().map((m) => m.name));
    expect(registered.size).toBe(16);
    const namesIn = (text: string) => new Set([...text.matchAll(/rabbit_inbox_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, "")));
    const docs = namesIn(readFileSync(new URL("../../docs/observability.md", import.meta.url), "utf8"));
    const dashboard = namesIn(readFileSync(new URL("../../docs/grafana/rabbit-inbox.json", import.meta.url), "utf8"));
    // The OpenTelemetry instruments, as the library creates them on a meter.
    const instruments = new Set<string>();
    const instrument = () => ({ add: () => undefined, record: () => undefined, addCallback: () => undefined, removeCallback: () => undefined });
    const meter = new Proxy({}, { get: () => (name: string) => { instruments.add(name); return instrument(); } }) as unknown as Meter;
    otelConsumerMetrics(meter, { queue: "q", handler: "h", node: () => "n", partitionsHeld: () => 0, paused: () => false, quarantineCounts: () => Promise.resolve([]), sampleIntervalMs: 1 });
    otelRelayMetrics(meter, { node: () => "n", backlog: () => Promise.reject(new Error("unused")) });
    expect(instruments.size).toBe(16);
    expect([...registered].filter((name) => !docs.has(name))).toEqual([]);
    expect([...instruments].filter((name) => !docs.has(name))).toEqual([]);
    expect([...docs].filter((name) => !registered.has(name) && !instruments.has(name))).toEqual([]);
    expect([...dashboard].filter((name) => !registered.has(name))).toEqual([]);
    expect(dashboard.size).toBeGreaterThanOrEqual(14);
  });
});

describe("RateLimitedSample", () => {
  it("reads again only after the interval, and shares one read between concurrent callers", async () => {
    let now = 0;
    let reads = 0;
    const sample = new RateLimitedSample(() => Promise.resolve(++reads), 1000, () => now);
    expect(await Promise.all([sample.get(), sample.get()])).toEqual([1, 1]);
    now = 999;
    expect(await sample.get()).toBe(1);
    now = 1000;
    expect(await sample.get()).toBe(2);
    expect(reads).toBe(2);
  });

  it("passes a failed read on, and tries again at the next call", async () => {
    let fail = true;
    const sample = new RateLimitedSample(() => (fail ? Promise.reject(new Error("down")) : Promise.resolve(7)), 1000);
    await expect(sample.get()).rejects.toThrow("down");
    fail = false;
    expect(await sample.get()).toBe(7);
  });
});
