// rabbit-inbox/observability: the types of what the consumer and the relay report (metrics
// options, health, each delivery's outcome, process spans), and the quarantine reasons the
// metrics count by name.
export type { MetricsOptions, MetricsRegistry } from "./observability/inbox-metrics.js";
export type { ProcessSpans } from "./observability/process-spans.js";
export type { ConsumerHealth, RelayHealth } from "./observability/health.js";
export type { DatabaseHealth } from "./core/store.js";
export type { BackpressureState } from "./amqp/backpressure-gate.js";
export type { OutcomeCounts } from "./amqp/delivery-settler.js";
export type { Outcome } from "./core/outcome.js";
export { LIBRARY_QUARANTINE_REASONS } from "./observability/metric-labels.js";
