import type { TransactionMetrics } from "../core/instrumentation.js";
import type { Outcome } from "../core/outcome.js";

/**
 * A prom-client `Registry` (15.x), as far as these types need to know it: the library's public
 * types do not import prom-client, so an application without it compiles without it.
 */
export interface MetricsRegistry {
  getSingleMetric(name: string): unknown;
  removeSingleMetric(name: string): void;
  registerMetric(metric: never): void;
  metrics(): Promise<string>;
}

/**
 * Where the consumer and the relay export their metrics: a prom-client Registry the
 * application owns (and serves itself). Without it nothing is created and prom-client is
 * never loaded.
 */
export interface MetricsOptions {
  registry: MetricsRegistry;
  /**
   * The gauges that cost a database query (outbox backlog, quarantine held) run it at most once
   * per this interval, however often Prometheus scrapes; in between a scrape gets the last value.
   * Default 15 000 ms.
   */
  sampleIntervalMs?: number;
}

export const DEFAULT_SAMPLE_INTERVAL_MS = 15_000;

/** One settled delivery, as the consumer's metrics see it: never its body. */
export interface SettledDelivery {
  /** performance.now() when it arrived in this process. */
  readonly receivedAt: number;
  readonly message: { readonly fields: { readonly redelivered: boolean } };
}

/** What the consumer reports; one call per batch or per connection event, never per scrape. */
export interface ConsumerMetrics extends TransactionMetrics {
  /** A batch was settled on the broker at `now` (performance.now()), in delivery order. */
  settled(batch: readonly SettledDelivery[], outcomes: readonly Outcome[], now: number): void;
  /** A session became the one in use (the first connect, or a reconnect). */
  connected(node: string): void;
  /** Takes the consumer's gauges off the registry's scrapes (the consumer stopped). */
  close(): void;
}

/** What the outbox relay reports. */
export interface RelayMetrics {
  /** The broker confirmed a row. */
  published(): void;
  /** A row's publish failed (it stays pending and is retried). */
  publishFailed(): void;
  /** A new session replaced a lost one. */
  reconnected(): void;
  close(): void;
}

const nothing = (): void => undefined;

/** Metrics off: every call is an empty function, so the hot path pays a call and nothing else. */
export const noConsumerMetrics: ConsumerMetrics = {
  transactionCommitted: nothing, transactionRetried: nothing, settled: nothing, connected: nothing, close: nothing,
};

export const noRelayMetrics: RelayMetrics = { published: nothing, publishFailed: nothing, reconnected: nothing, close: nothing };
