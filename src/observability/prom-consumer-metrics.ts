import type { Outcome } from "../core/outcome.js";
import type { QuarantineCount } from "../core/store-contract/quarantine-admin.js";
import { type ConsumerMetrics, DEFAULT_SAMPLE_INTERVAL_MS, type MetricsOptions, type SettledDelivery } from "./inbox-metrics.js";
import { labelValue, reasonLabeller } from "./metric-labels.js";
import { RateLimitedSample } from "./rate-limited-sample.js";
import { scrapedGauge, sharedCounter, sharedHistogram } from "./shared-metrics.js";

/** Seconds, from a millisecond to a minute: settle latency and transaction time. */
export const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
export const BATCH_SIZE_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000];
export const PAUSED_HELP = "1 while backpressure (e.g. the outbox backlog) holds this consumer's batches back, 0 otherwise.";

/** What the consumer's gauges read on scrape. */
export interface ConsumerGaugeSources {
  queue: string;
  handler: string;
  /** The node of the session in use; undefined while there is none. */
  node: () => string | undefined;
  /** The partitions held now; absent when consumption is not partitioned. */
  partitionsHeld?: () => number;
  /** Whether backpressure holds consumption now; absent without a `backpressure` option. */
  paused?: () => boolean;
  /** The store's quarantine counts (all handlers); absent when the store has no operations. */
  quarantineCounts?: () => Promise<QuarantineCount[]>;
  /** The `reason` label of a quarantine. Default: the library's reasons, and `other` for any other. */
  reasonLabel?: (reason: string) => string;
}

/** Of the store's quarantine counts (every handler), the entries of `handler` still held. */
export function heldEntries(counts: readonly QuarantineCount[], handler: string): number {
  return counts.reduce((sum, c) => sum + (c.handler === handler && c.status === "held" ? c.entries : 0), 0);
}

/** The consumer's metrics on a prom-client registry, labelled with its queue and handler. */
export function promConsumerMetrics(options: MetricsOptions, sources: ConsumerGaugeSources): ConsumerMetrics {
  const { registry } = options;
  const queue = labelValue(sources.queue);
  const handler = labelValue(sources.handler);
  const labels = { queue, handler };
  const reasonLabel = sources.reasonLabel ?? reasonLabeller();
  const messages = sharedCounter(registry, "rabbit_inbox_messages_total", "Deliveries settled, by outcome (applied, duplicate, quarantined, delayed, requeue).", ["queue", "handler", "outcome"]);
  const quarantined = sharedCounter(registry, "rabbit_inbox_quarantined_total", "Deliveries quarantined, by reason.", ["queue", "handler", "reason"]);
  const redeliveries = sharedCounter(registry, "rabbit_inbox_redeliveries_total", "Settled deliveries the broker had delivered before (redelivered flag).", ["queue", "handler"]);
  const retries = sharedCounter(registry, "rabbit_inbox_transaction_retries_total", "Transactions that failed and ran again in process, by error kind.", ["queue", "handler", "kind"]);
  const reconnects = sharedCounter(registry, "rabbit_inbox_reconnects_total", "Broker sessions that replaced a lost one.", ["role", "queue"]);
  const batchSize = sharedHistogram(registry, "rabbit_inbox_batch_size", "Deliveries per settled batch (one transaction, or one per message for events redelivered more than once).", ["queue", "handler"], BATCH_SIZE_BUCKETS);
  const transaction = sharedHistogram(registry, "rabbit_inbox_transaction_duration_seconds", "Time from a transaction's start to its commit.", ["queue", "handler"], SECONDS_BUCKETS);
  const latency = sharedHistogram(registry, "rabbit_inbox_settle_latency_seconds", "Time from a delivery's arrival in the process to its settlement (ack, or nack).", ["queue", "handler"], SECONDS_BUCKETS);

  // Bound once: the hot path then skips the label lookup.
  const byOutcome = {
    applied: messages.labels({ ...labels, outcome: "applied" }), duplicate: messages.labels({ ...labels, outcome: "duplicate" }),
    quarantined: messages.labels({ ...labels, outcome: "quarantined" }), delayed: messages.labels({ ...labels, outcome: "delayed" }),
    requeue: messages.labels({ ...labels, outcome: "requeue" }),
  };
  for (const counter of Object.values(byOutcome)) counter.inc(0);
  const redelivered = redeliveries.labels(labels);
  redelivered.inc(0);
  const reconnected = reconnects.labels({ role: "consumer", queue });
  reconnected.inc(0);
  const batchSizes = batchSize.labels(labels);
  const transactions = transaction.labels(labels);
  const latencies = latency.labels(labels);

  let lastNode: string | undefined;
  let connects = 0;
  const removers = [
    scrapedGauge(registry, "rabbit_inbox_broker_connected", "1 while the broker session to this node is open, 0 after it was lost.", ["role", "queue", "node"], (gauge) => {
      const node = sources.node();
      if (node !== undefined) gauge.set({ role: "consumer", queue, node: labelValue(node) }, 1);
      else if (lastNode !== undefined) gauge.set({ role: "consumer", queue, node: lastNode }, 0);
    }),
  ];
  const { partitionsHeld, paused, quarantineCounts } = sources;
  if (partitionsHeld) {
    removers.push(scrapedGauge(registry, "rabbit_inbox_partitions_held", "Partition queues this replica consumes now.", ["queue"], (gauge) => {
      gauge.set({ queue }, partitionsHeld());
    }));
  }
  if (paused) {
    removers.push(scrapedGauge(registry, "rabbit_inbox_consumer_paused", PAUSED_HELP, ["queue"], (gauge) => {
      gauge.set({ queue }, paused() ? 1 : 0);
    }));
  }
  if (quarantineCounts) {
    const counts = new RateLimitedSample(quarantineCounts, options.sampleIntervalMs ?? DEFAULT_SAMPLE_INTERVAL_MS);
    removers.push(scrapedGauge(registry, "rabbit_inbox_quarantine_held", "Quarantine entries of this handler not resolved yet (neither replayed nor discarded).", ["handler"], async (gauge) => {
      let all: QuarantineCount[];
      try {
        all = await counts.get();
      } catch {
        return; // the series is left out of this scrape rather than reported as a false 0
      }
      gauge.set({ handler }, heldEntries(all, handler));
    }));
  }

  return {
    transactionCommitted: (seconds) => transactions.observe(seconds),
    transactionRetried: (kind) => retries.inc({ ...labels, kind }),
    settled(batch: readonly SettledDelivery[], outcomes: readonly Outcome[], now: number) {
      batchSizes.observe(batch.length);
      outcomes.forEach((o, i) => {
        const d = batch[i]!;
        byOutcome[o.kind].inc();
        if (o.kind === "quarantined") quarantined.inc({ ...labels, reason: reasonLabel(o.reason) });
        if (d.message.fields.redelivered) redelivered.inc();
        latencies.observe((now - d.receivedAt) / 1000);
      });
    },
    connected(node) {
      lastNode = labelValue(node);
      if (++connects > 1) reconnected.inc();
    },
    close() {
      for (const remove of removers) remove();
    },
  };
}
