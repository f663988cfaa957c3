/**
 * The consumer's and the relay's instruments through the OpenTelemetry metrics API with a real
 * SDK (a MeterProvider and a reader collected on demand): the same counts as the Prometheus
 * series, for what was sent over the in-memory broker — applied events, a duplicate, a
 * conflicting second version, a malformed body, and a transaction retried after a transient
 * failure. Without a registered MeterProvider nothing is made.
 */
import { metrics } from "@opentelemetry/api";
import { AggregationTemporality, MeterProvider, MetricReader, type DataPoint, type Histogram } from "@opentelemetry/sdk-metrics";
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TransientStoreError } from "../../src/core/errors.js";
import { noConsumerMetrics, noRelayMetrics } from "../../src/observability/inbox-metrics.js";
import { consumerMetricsFor, relayMetricsFor } from "../../src/observability/metrics-for.js";
import { otelConsumerMetrics } from "../../src/observability/otel-consumer-metrics.js";
import type { QuarantineCount } from "../../src/core/store-contract/quarantine-admin.js";
import { parsePrometheusText, sampleValue } from "../support/prometheus-text.js";
import type { FakeBroker } from "../support/fake-amqp.js";
import { fakeBrokerPerTest, until } from "../support/fake-consumer.js";
import { MemoryStore } from "../support/memory-store.js";

vi.mock("amqplib", async () => (await import("../support/fake-amqp.js")).amqplibOverFakeBroker());

class OnDemandReader extends MetricReader {
  constructor() { super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE }); }
  protected onForceFlush(): Promise<void> { return Promise.resolve(); }
  protected onShutdown(): Promise<void> { return Promise.resolve(); }
}

const env = fakeBrokerPerTest();
let broker: FakeBroker;
let reader: OnDemandReader;
let provider: MeterProvider;
beforeEach(() => {
  broker = env.broker;
  reader = new OnDemandReader();
  provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
});
afterEach(async () => {
  metrics.disable();
  await provider.shutdown();
});

/** Every data point of the last collection, by instrument name. */
async function collect(): Promise<Map<string, Array<DataPoint<number | Histogram>>>> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  const byName = new Map<string, Array<DataPoint<number | Histogram>>>();
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric.dataPoints as Array<DataPoint<number | Histogram>>);
  }
  return byName;
}

function value(points: Map<string, Array<DataPoint<number | Histogram>>>, name: string, attributes: Record<string, unknown>): number | Histogram | undefined {
  return points.get(name)?.find((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))?.value;
}

describe("OpenTelemetry metrics", () => {
  it("count what the consumer settled, under the Prometheus names, with no body-derived attribute", async () => {
    const store = new MemoryStore();
    store.script = (attempt) => {
      if (attempt === 2) throw new TransientStoreError("simulated deadlock");
      return "commit";
    };
    const { consumer } = env.build({ store, batchSize: 1 });
    await consumer.start();
    broker.publishJson("work", { tenant: "t1", event_id: "e-1", amount: 1 });
    await until(() => consumer.outcomeCounts.applied === 1, "e-1 applied");
    broker.publishJson("work", { tenant: "t1", event_id: "e-2", amount: 2 });
    await until(() => consumer.outcomeCounts.applied === 2, "e-2 applied after a retry");
    broker.publishJson("work", { tenant: "t1", event_id: "e-1", amount: 1 });
    broker.publishJson("work", { tenant: "t1", event_id: "e-1", amount: 99 });
    broker.publish("", "work", "{not json", { contentType: "application/json" });
    await until(() => consumer.outcomeCounts.duplicate === 1 && consumer.outcomeCounts.quarantined === 2, "duplicate, conflict and malformed settled");

    const points = await collect();
    const labels = { queue: "work", handler: "fake-consumer" };
    expect(value(points, "rabbit_inbox_messages", { ...labels, outcome: "applied" })).toBe(2);
    expect(value(points, "rabbit_inbox_messages", { ...labels, outcome: "duplicate" })).toBe(1);
    expect(value(points, "rabbit_inbox_messages", { ...labels, outcome: "quarantined" })).toBe(2);
    expect(value(points, "rabbit_inbox_quarantined", { ...labels, reason: "conflict" })).toBe(1);
    expect(value(points, "rabbit_inbox_quarantined", { ...labels, reason: "invalid" })).toBe(1);
    expect(value(points, "rabbit_inbox_transaction_retries", { ...labels, kind: "transient" })).toBe(1);
    expect(value(points, "rabbit_inbox_redeliveries", labels)).toBeUndefined();
    expect((value(points, "rabbit_inbox_settle_latency", labels) as Histogram).count).toBe(5);
    expect((value(points, "rabbit_inbox_batch_size", labels) as Histogram).sum).toBe(5);
    expect((value(points, "rabbit_inbox_transaction_duration", labels) as Histogram).count).toBeGreaterThanOrEqual(2);
    expect(value(points, "rabbit_inbox_broker_connected", { role: "consumer", queue: "work" })).toBe(1);
    const attributes = [...points.values()].flat().map((p) => p.attributes);
    expect(JSON.stringify(attributes)).not.toMatch(/e-\d|t1/);

    await consumer.stop();
    const after = await collect();
    // Its counters stay after the stop (the SDK, not the library, decides how long a gauge's
    // last observation is reported once its callback is removed).
    expect(value(after, "rabbit_inbox_messages", { ...labels, outcome: "applied" })).toBe(2);
  });

  it("count the relay's publishes and failures, read the backlog on collection, and stop reading it once closed", async () => {
    let reads = 0;
    const backlog = () => {
      reads++;
      return Promise.resolve({ pending: 3, oldestPendingAt: new Date(10_000), now: new Date(70_000), failing: 0, unroutable: 0, worst: null });
    };
    const relay = relayMetricsFor(undefined, { node: () => "node-a", backlog });
    relay.published();
    relay.published();
    relay.publishFailed();
    relay.reconnected();
    const points = await collect();
    expect(value(points, "rabbit_inbox_outbox_published", {})).toBe(2);
    expect(value(points, "rabbit_inbox_outbox_publish_failures", {})).toBe(1);
    expect(value(points, "rabbit_inbox_reconnects", { role: "relay" })).toBe(1);
    expect(value(points, "rabbit_inbox_broker_connected", { role: "relay", node: "node-a" })).toBe(1);
    expect(value(points, "rabbit_inbox_outbox_pending", {})).toBe(3);
    expect(value(points, "rabbit_inbox_outbox_oldest_pending_age", {})).toBe(60);
    expect(reads).toBe(2);
    relay.close();
    await collect();
    expect(reads).toBe(2);
  });

  it("records on a prom-client registry and through OpenTelemetry at once when both are there", async () => {
    const registry = new Registry();
    const relay = relayMetricsFor({ registry }, { node: () => "node-a" });
    relay.published();
    relay.publishFailed();
    const points = await collect();
    expect(value(points, "rabbit_inbox_outbox_published", {})).toBe(1);
    expect(value(points, "rabbit_inbox_outbox_publish_failures", {})).toBe(1);
    const scraped = parsePrometheusText(await registry.metrics());
    expect(sampleValue(scraped, "rabbit_inbox_outbox_published_total", {})).toBe(1);
    expect(sampleValue(scraped, "rabbit_inbox_outbox_publish_failures_total", {})).toBe(1);
    relay.close();
  });

  it("reports the handler's held quarantine entries, and leaves the gauge out when the read fails", async () => {
    let fail = false;
    const counts = (): Promise<QuarantineCount[]> => fail ? Promise.reject(new Error("database down")) : Promise.resolve([
      { handler: "h", reason: "conflict", status: "held", entries: 2, oldest: new Date(0) },
      { handler: "h", reason: "invalid", status: "held", entries: 3, oldest: new Date(0) },
      { handler: "h", reason: "invalid", status: "replayed", entries: 7, oldest: new Date(0) },
      { handler: "other", reason: "invalid", status: "held", entries: 11, oldest: new Date(0) },
    ]);
    const consumer = otelConsumerMetrics(metrics.getMeter("test"), { queue: "q", handler: "h", node: () => "n", quarantineCounts: counts, sampleIntervalMs: 0 });
    expect(value(await collect(), "rabbit_inbox_quarantine_held", { handler: "h" })).toBe(5);
    consumer.close();
    fail = true;
    const failing = otelConsumerMetrics(metrics.getMeter("test-2"), { queue: "q2", handler: "h2", node: () => "n", quarantineCounts: counts, sampleIntervalMs: 0 });
    expect(value(await collect(), "rabbit_inbox_quarantine_held", { handler: "h2" })).toBeUndefined();
    failing.close();
  });

  it("reports 1 while backpressure holds the consumer back, 0 once it goes on, and nothing without the option", async () => {
    let pause = true;
    const backpressure = { name: "test backlog", checkIntervalMs: 5, check: () => Promise.resolve({ pause, detail: {} }) };
    const { consumer } = env.build({ backpressure, batchSize: 1 });
    await consumer.start();
    broker.publishJson("work", { tenant: "t1", event_id: "e-1", amount: 1 });
    await until(() => consumer.health().backpressure?.paused === true, "the pause");
    expect(value(await collect(), "rabbit_inbox_consumer_paused", { queue: "work" })).toBe(1);
    pause = false;
    await until(() => consumer.health().backpressure?.paused === false, "the resume");
    expect(value(await collect(), "rabbit_inbox_consumer_paused", { queue: "work" })).toBe(0);
    const plain = env.build({ queue: "plain" }).consumer;
    await plain.start();
    expect(value(await collect(), "rabbit_inbox_consumer_paused", { queue: "plain" })).toBeUndefined();
  });

  it("makes nothing without a registered MeterProvider", () => {
    metrics.disable();
    const consumer = consumerMetricsFor(undefined, { queue: "q", handler: { name: "h" }, store: {}, partitioned: false, node: () => "n", partitionsHeld: () => 0 });
    expect(consumer).toBe(noConsumerMetrics);
    expect(relayMetricsFor(undefined, { node: () => "n" })).toBe(noRelayMetrics);
  });
});
