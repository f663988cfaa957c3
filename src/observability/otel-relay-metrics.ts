import type { Attributes, Meter } from "@opentelemetry/api";
import type { OutboxBacklog } from "../core/store-contract/outbox-admin.js";
import type { RelayMetrics } from "./inbox-metrics.js";
import { labelValue } from "./metric-labels.js";
import { oldestPendingAgeSeconds, type RelayGaugeSources } from "./prom-relay-metrics.js";

type Observer = { observe(value: number, attributes?: Attributes): void };

/**
 * The outbox relay's instruments through the OpenTelemetry metrics API, named as the Prometheus
 * series; no-op without a registered MeterProvider.
 */
export function otelRelayMetrics(meter: Meter, sources: RelayGaugeSources): RelayMetrics {
  const published = meter.createCounter("rabbit_inbox_outbox_published", { description: "Outbox rows the broker confirmed." });
  const failures = meter.createCounter("rabbit_inbox_outbox_publish_failures", { description: "Outbox publishes that failed (refused, unroutable, unconfirmed in time, lost); the row is retried." });
  const reconnects = meter.createCounter("rabbit_inbox_reconnects", { description: "Broker sessions that replaced a lost one." });
  const relayRole = { role: "relay" };
  const observers: Array<() => void> = [];

  let lastNode: string | undefined;
  const connected = meter.createObservableGauge("rabbit_inbox_broker_connected", { description: "1 while the broker session to this node is open, 0 after it was lost." });
  const observeConnected = (result: Observer) => {
    const node = sources.node();
    if (node !== undefined) lastNode = labelValue(node);
    if (lastNode !== undefined) result.observe(node === undefined ? 0 : 1, { role: "relay", node: lastNode });
  };
  connected.addCallback(observeConnected);
  observers.push(() => connected.removeCallback(observeConnected));

  const { backlog } = sources;
  if (backlog) {
    const pending = meter.createObservableGauge("rabbit_inbox_outbox_pending", { description: "Outbox rows not sent yet (due, waiting for a retry, or being published)." });
    const age = meter.createObservableGauge("rabbit_inbox_outbox_oldest_pending_age", { description: "Age of the oldest unsent outbox row, by the database's clock; 0 when none.", unit: "s" });
    // One read serves both gauges of a collection (the caller's sample shares and rate-limits it).
    const read = (): Promise<OutboxBacklog | undefined> => backlog().catch(() => undefined);
    const observePending = async (result: Observer) => { const b = await read(); if (b) result.observe(b.pending); };
    const observeAge = async (result: Observer) => { const b = await read(); if (b) result.observe(oldestPendingAgeSeconds(b)); };
    pending.addCallback(observePending);
    age.addCallback(observeAge);
    observers.push(() => pending.removeCallback(observePending), () => age.removeCallback(observeAge));
  }
  return {
    published: () => published.add(1),
    publishFailed: () => failures.add(1),
    reconnected: () => reconnects.add(1, relayRole),
    close() {
      for (const remove of observers.splice(0)) remove();
    },
  };
}
