// rabbit-inbox/observability: the types of what the consumer and the relay report (metrics
// options, health, each delivery's outcome, process spans), and the quarantine reasons the
// metrics count by name.
export type { MetricsOptions, MetricsRegistry } from "./observability/inbox-metrics.js";
export type { ProcessSpans } from "./core/instrumentation.js";
export type { ConsumerHealth } from "./amqp/consumer-health.js";
export type { RelayHealth } from "./outbox/relay-health.js";
export type { DatabaseHealth } from "./core/store-contract/store.js";
export type { BackpressureState } from "./amqp/backpressure-gate.js";
export type { OutcomeCounts } from "./amqp/delivery-settler.js";
export type { Outcome } from "./core/outcome.js";
export { LIBRARY_QUARANTINE_REASONS } from "./observability/metric-labels.js";
