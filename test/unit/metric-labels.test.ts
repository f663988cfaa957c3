/**
 * Metric labels never take a value from a message as it is. The `reason` of
 * `rabbit_inbox_quarantined_total` is one of a bounded set: the library's reasons and those the
 * handler declares in `quarantineReasons`; any other reason a handler gives (text that may carry
 * an id, or a producer's words) is counted as `other`, its text kept in the quarantine row. And
 * label values are shown inert: a queue or handler name with ESC or a bidirectional override
 * reaches the exposition escaped. Before, 2,000 distinct reasons made 2,000 series and a raw ESC
 * and U+202E reached `/metrics`.
 */
import { metrics as otelMetrics } from "@opentelemetry/api";
import { AggregationTemporality, MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { InboxConfigError } from "../../src/core/errors.js";
import type { Outcome } from "../../src/core/outcome.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { QuarantineRecord } from "../../src/core/store-contract/store.js";
import { consumerMetricsFor, relayMetricsFor } from "../../src/observability/metrics-for.js";
import { MemoryStore } from "../support/memory-store.js";
import { parsePrometheusText, sampleValue } from "../support/prometheus-text.js";
import { silentLogger } from "../../src/core/logger.js";

const record = {} as QuarantineRecord;
const quarantined = (reason: string): Outcome => ({ kind: "quarantined", key: null, reason, detail: "d", record });
const delivery = { receivedAt: 0, message: { fields: { redelivered: false } } };

function consumerMetrics(registry: Registry, handler: { name: string; quarantineReasons?: readonly string[] }, queue = "q") {
  return consumerMetricsFor({ registry }, { queue, handler, store: {}, partitioned: false, node: () => "n:5672", partitionsHeld: () => 0 });
}

describe("the reason label", () => {
  it("takes the library's reasons and the handler's declared ones; any other is counted as other", async () => {
    const registry = new Registry();
    const metrics = consumerMetrics(registry, { name: "ledger", quarantineReasons: ["account_missing"] });
    const library = ["invalid", "conflict", "stale", "retries_exhausted", "constraint_violation", "invalid_publish", "too_large"];
    const free = Array.from({ length: 2000 }, (_, i) => `card ${i} declined`);
    const reasons = [...library, "account_missing", ...free];
    metrics.settled(reasons.map(() => delivery), reasons.map(quarantined), 1);
    const text = await registry.metrics();
    const s = parsePrometheusText(text);
    const labels = { queue: "q", handler: "ledger" };
    for (const reason of [...library, "account_missing"]) expect(sampleValue(s, "rabbit_inbox_quarantined_total", { ...labels, reason })).toBe(1);
    expect(sampleValue(s, "rabbit_inbox_quarantined_total", { ...labels, reason: "other" })).toBe(2000);
    expect(s.filter((x) => x.name === "rabbit_inbox_quarantined_total")).toHaveLength(library.length + 2);
    expect(text).not.toContain("declined");
  });

  it("a handler's quarantineReasons must be strings", () => {
    const make = (quarantineReasons: unknown) => new InboxPipeline({
      store: new MemoryStore(), logger: silentLogger,
      handler: { name: "h", quarantineReasons: quarantineReasons as string[], handle: () => Promise.resolve() },
    });
    expect(() => make(["ok", 7])).toThrow(new InboxConfigError("handler h: quarantineReasons must be an array of strings"));
    expect(() => make("account_missing")).toThrow(InboxConfigError);
    expect(() => make(["account_missing"])).not.toThrow();
  });
});

describe("label values", () => {
  it("are shown inert: control and bidirectional characters escaped", async () => {
    const registry = new Registry();
    const metrics = consumerMetrics(registry, { name: "h\u001b[31m", quarantineReasons: ["evil\u202ereason"] }, "q\u202egnp.exe");
    metrics.settled([delivery], [quarantined("evil\u202ereason")], 1);
    const text = await registry.metrics();
    expect(text.includes("\u001b") || text.includes("\u202e")).toBe(false);
    const s = parsePrometheusText(text);
    expect(sampleValue(s, "rabbit_inbox_quarantined_total", { queue: "q\\u202egnp.exe", handler: "h\\x1b[31m", reason: "evil\\u202ereason" })).toBe(1);
  });

  it("the relay's node label too", async () => {
    const registry = new Registry();
    relayMetricsFor({ registry }, { node: () => "node\u202e:5672" });
    const text = await registry.metrics();
    expect(text).toContain('node="node\\\\u202e:5672"');
    expect(text.includes("\u202e")).toBe(false);
  });
});

class OnDemandReader extends MetricReader {
  constructor() { super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE }); }
  protected onForceFlush(): Promise<void> { return Promise.resolve(); }
  protected onShutdown(): Promise<void> { return Promise.resolve(); }
}

describe("through OpenTelemetry", () => {
  let provider: MeterProvider | undefined;
  afterEach(async () => {
    otelMetrics.disable();
    await provider?.shutdown();
  });

  it("the same bounded reasons and escaped values", async () => {
    const reader = new OnDemandReader();
    provider = new MeterProvider({ readers: [reader] });
    otelMetrics.setGlobalMeterProvider(provider);
    const metrics = consumerMetricsFor(undefined, { queue: "q\u202e", handler: { name: "ledger" }, store: {}, partitioned: false, node: () => "n", partitionsHeld: () => 0 });
    metrics.settled([delivery, delivery], [quarantined("invalid"), quarantined("card 7 declined")], 1);
    const { resourceMetrics } = await reader.collect();
    const points = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((m) => m.descriptor.name === "rabbit_inbox_quarantined")!.dataPoints;
    expect(points.map((p) => [p.attributes.reason, p.attributes.queue, p.value]).sort()).toEqual([["invalid", "q\\u202e", 1], ["other", "q\\u202e", 1]]);
  });
});
