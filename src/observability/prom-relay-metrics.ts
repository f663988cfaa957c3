import type { OutboxBacklog } from "../core/store-contract/outbox-admin.js";
import type { MetricsOptions, RelayMetrics } from "./inbox-metrics.js";
import { labelValue } from "./metric-labels.js";
import { scrapedGauge, sharedCounter } from "./shared-metrics.js";

/** What the relay's gauges read on scrape. */
export interface RelayGaugeSources {
  /** The node of the session in use; undefined while there is none. */
  node: () => string | undefined;
  /** The outbox backlog, rate-limited by the caller; absent when the store has no operations. */
  backlog?: () => Promise<OutboxBacklog>;
}

/** The outbox relay's metrics on a prom-client registry. */
export function promRelayMetrics(options: MetricsOptions, sources: RelayGaugeSources): RelayMetrics {
  const { registry } = options;
  const published = sharedCounter(registry, "rabbit_inbox_outbox_published_total", "Outbox rows the broker confirmed.", []);
  const failures = sharedCounter(registry, "rabbit_inbox_outbox_publish_failures_total", "Outbox publishes that failed (refused, unroutable, unconfirmed in time, lost); the row is retried.", []);
  const reconnects = sharedCounter(registry, "rabbit_inbox_reconnects_total", "Broker sessions that replaced a lost one.", ["role", "queue"]);
  published.inc(0);
  failures.inc(0);
  const reconnected = reconnects.labels({ role: "relay" });
  reconnected.inc(0);

  let lastNode: string | undefined;
  const removers = [
    scrapedGauge(registry, "rabbit_inbox_broker_connected", "1 while the broker session to this node is open, 0 after it was lost.", ["role", "queue", "node"], (gauge) => {
      const node = sources.node();
      if (node !== undefined) lastNode = labelValue(node);
      if (lastNode !== undefined) gauge.set({ role: "relay", node: lastNode }, node === undefined ? 0 : 1);
    }),
  ];
  const { backlog } = sources;
  if (backlog) {
    // One read serves both gauges of a scrape: the sampler shares it and rate-limits the query.
    const read = async (): Promise<OutboxBacklog | undefined> => backlog().catch(() => undefined);
    removers.push(scrapedGauge(registry, "rabbit_inbox_outbox_pending", "Outbox rows not sent yet (due, waiting for a retry, or being published).", [], async (gauge) => {
      const b = await read();
      if (b) gauge.set(b.pending);
    }));
    removers.push(scrapedGauge(registry, "rabbit_inbox_outbox_oldest_pending_age_seconds", "Age of the oldest unsent outbox row, by the database's clock; 0 when none.", [], async (gauge) => {
      const b = await read();
      if (b) gauge.set(oldestPendingAgeSeconds(b));
    }));
  }
  return {
    published: () => published.inc(),
    publishFailed: () => failures.inc(),
    reconnected: () => reconnected.inc(),
    close() {
      for (const remove of removers) remove();
    },
  };
}

export function oldestPendingAgeSeconds(backlog: OutboxBacklog): number {
  return backlog.oldestPendingAt ? Math.max(0, (backlog.now.getTime() - backlog.oldestPendingAt.getTime()) / 1000) : 0;
}
