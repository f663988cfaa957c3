import type { Attributes, Histogram, Meter } from "@opentelemetry/api";
import type { Outcome } from "../core/outcome.js";
import type { ConsumerMetrics, SettledDelivery } from "./inbox-metrics.js";
import type { ConsumerGaugeSources } from "./prom-consumer-metrics.js";
import { BATCH_SIZE_BUCKETS, PAUSED_HELP, SECONDS_BUCKETS, heldEntries } from "./prom-consumer-metrics.js";
import { labelValue, reasonLabeller } from "./metric-labels.js";
import { RateLimitedSample } from "./rate-limited-sample.js";

/**
 * The consumer's instruments through the OpenTelemetry metrics API, under the names of the
 * Prometheus series (an OpenTelemetry Prometheus exporter adds `_total` to counters and the unit
 * to histograms, so both paths scrape alike). Without a registered MeterProvider the meter is the
 * API's no-op one and every call below costs an empty function.
 */
export function otelConsumerMetrics(meter: Meter, sources: ConsumerGaugeSources & { sampleIntervalMs: number }): ConsumerMetrics {
  const queue = labelValue(sources.queue);
  const handler = labelValue(sources.handler);
  const base: Attributes = { queue, handler };
  const reasonLabel = sources.reasonLabel ?? reasonLabeller();
  const messages = meter.createCounter("rabbit_inbox_messages", { description: "Deliveries settled, by outcome (applied, duplicate, quarantined, delayed, requeue)." });
  const quarantined = meter.createCounter("rabbit_inbox_quarantined", { description: "Deliveries quarantined, by reason." });
  const redeliveries = meter.createCounter("rabbit_inbox_redeliveries", { description: "Settled deliveries the broker had delivered before (redelivered flag)." });
  const retries = meter.createCounter("rabbit_inbox_transaction_retries", { description: "Transactions that failed and ran again in process, by error kind." });
  const reconnects = meter.createCounter("rabbit_inbox_reconnects", { description: "Broker sessions that replaced a lost one." });
  const batchSize = meter.createHistogram("rabbit_inbox_batch_size", { description: "Deliveries per settled batch.", advice: { explicitBucketBoundaries: BATCH_SIZE_BUCKETS } });
  const transaction = seconds(meter, "rabbit_inbox_transaction_duration", "Time from a transaction's start to its commit.");
  const latency = seconds(meter, "rabbit_inbox_settle_latency", "Time from a delivery's arrival in the process to its settlement (ack, or nack).");

  // Attribute objects made once: the SDK looks a series up by its attributes on every call.
  const byOutcome: Record<Outcome["kind"], Attributes> = {
    applied: { ...base, outcome: "applied" }, duplicate: { ...base, outcome: "duplicate" }, quarantined: { ...base, outcome: "quarantined" },
    delayed: { ...base, outcome: "delayed" }, requeue: { ...base, outcome: "requeue" },
  };
  const reconnectAttributes = { role: "consumer", queue };
  let lastNode: string | undefined;
  let connects = 0;

  const connected = meter.createObservableGauge("rabbit_inbox_broker_connected", { description: "1 while the broker session to this node is open, 0 after it was lost." });
  const observers: Array<() => void> = [];
  const observeConnected = (result: { observe(value: number, attributes: Attributes): void }) => {
    const node = sources.node();
    if (node !== undefined) result.observe(1, { role: "consumer", queue, node: labelValue(node) });
    else if (lastNode !== undefined) result.observe(0, { role: "consumer", queue, node: lastNode });
  };
  connected.addCallback(observeConnected);
  observers.push(() => connected.removeCallback(observeConnected));

  const { partitionsHeld, paused, quarantineCounts } = sources;
  if (partitionsHeld) {
    const gauge = meter.createObservableGauge("rabbit_inbox_partitions_held", { description: "Partition queues this replica consumes now." });
    const observe = (result: { observe(value: number, attributes: Attributes): void }) => result.observe(partitionsHeld(), { queue });
    gauge.addCallback(observe);
    observers.push(() => gauge.removeCallback(observe));
  }
  if (paused) {
    const gauge = meter.createObservableGauge("rabbit_inbox_consumer_paused", { description: PAUSED_HELP });
    const observe = (result: { observe(value: number, attributes: Attributes): void }) => result.observe(paused() ? 1 : 0, { queue });
    gauge.addCallback(observe);
    observers.push(() => gauge.removeCallback(observe));
  }
  if (quarantineCounts) {
    const counts = new RateLimitedSample(quarantineCounts, sources.sampleIntervalMs);
    const gauge = meter.createObservableGauge("rabbit_inbox_quarantine_held", { description: "Quarantine entries of this handler not resolved yet (neither replayed nor discarded)." });
    const observe = async (result: { observe(value: number, attributes: Attributes): void }) => {
      // A failed read leaves the series out of this collection rather than reporting a false 0.
      const all = await counts.get().catch(() => undefined);
      if (all) result.observe(heldEntries(all, handler), { handler });
    };
    gauge.addCallback(observe);
    observers.push(() => gauge.removeCallback(observe));
  }

  return {
    transactionCommitted: (s) => transaction.record(s, base),
    transactionRetried: (kind) => retries.add(1, { ...base, kind }),
    settled(batch: readonly SettledDelivery[], outcomes: readonly Outcome[], now: number) {
      batchSize.record(batch.length, base);
      // Counted per batch, not per message: one series lookup per outcome kind.
      const counts = new Map<Outcome["kind"], number>();
      let redelivered = 0;
      outcomes.forEach((o, i) => {
        const d = batch[i]!;
        counts.set(o.kind, (counts.get(o.kind) ?? 0) + 1);
        if (o.kind === "quarantined") quarantined.add(1, { ...base, reason: reasonLabel(o.reason) });
        if (d.message.fields.redelivered) redelivered++;
        latency.record((now - d.receivedAt) / 1000, base);
      });
      for (const [kind, n] of counts) messages.add(n, byOutcome[kind]);
      if (redelivered > 0) redeliveries.add(redelivered, base);
    },
    connected(node) {
      lastNode = labelValue(node);
      if (++connects > 1) reconnects.add(1, reconnectAttributes);
    },
    close() {
      for (const remove of observers.splice(0)) remove();
    },
  };
}

function seconds(meter: Meter, name: string, description: string): Histogram {
  return meter.createHistogram(name, { description, unit: "s", advice: { explicitBucketBoundaries: SECONDS_BUCKETS } });
}

