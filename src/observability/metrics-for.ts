import { containMethods } from "../core/contained-callback.js";
import type { ThrottledLogger } from "../core/log-throttle.js";
import { hasOperations } from "../core/store-contract/capabilities.js";
import type { ConsumerMetrics, MetricsOptions, RelayMetrics } from "./inbox-metrics.js";
import { DEFAULT_SAMPLE_INTERVAL_MS, noConsumerMetrics, noRelayMetrics } from "./inbox-metrics.js";
import { reasonLabeller } from "./metric-labels.js";
import { otel } from "./otel-api.js";
import { otelConsumerMetrics } from "./otel-consumer-metrics.js";
import { otelRelayMetrics } from "./otel-relay-metrics.js";
import { promConsumerMetrics } from "./prom-consumer-metrics.js";
import { promRelayMetrics, type RelayGaugeSources } from "./prom-relay-metrics.js";

/**
 * The meter of the OpenTelemetry MeterProvider registered now; undefined without the API or
 * without a registered SDK. The API's metrics have no proxy (unlike its traces): a meter taken
 * before the SDK is registered stays the no-op one, so there is nothing to keep in that case.
 */
function meter() {
  if (!otel) return undefined;
  const m = otel.metrics.getMeter("rabbit-inbox");
  return m.constructor === otel.createNoopMeter().constructor ? undefined : m;
}

/**
 * The consumer's metrics: on the prom-client registry when one is given, and through the
 * OpenTelemetry metrics API when an SDK's MeterProvider was registered before the consumer was
 * made; the no-op set when neither.
 */
export function consumerMetricsFor(
  options: MetricsOptions | undefined,
  consumer: {
    queue: string; handler: { name?: unknown; quarantineReasons?: readonly string[] } | undefined; store: object; partitioned: boolean;
    node: () => string | undefined; partitionsHeld: () => number; paused?: () => boolean;
  },
  log?: ThrottledLogger,
): ConsumerMetrics {
  const handler = consumer.handler?.name;
  // Without a handler name the pipeline refuses the configuration right after: register nothing.
  if (typeof handler !== "string" || handler === "") return noConsumerMetrics;
  const { store } = consumer;
  const operations = hasOperations(store) ? store.operations() : undefined;
  const sources = {
    queue: consumer.queue, handler, node: consumer.node, reasonLabel: reasonLabeller(consumer.handler?.quarantineReasons),
    ...(consumer.partitioned ? { partitionsHeld: consumer.partitionsHeld } : {}),
    ...(consumer.paused ? { paused: consumer.paused } : {}),
    ...(operations ? { quarantineCounts: () => operations.quarantineCounts() } : {}),
  };
  const otelMeter = meter();
  const sets = [
    ...(options ? [promConsumerMetrics(options, sources)] : []),
    ...(otelMeter ? [otelConsumerMetrics(otelMeter, { ...sources, sampleIntervalMs: options?.sampleIntervalMs ?? DEFAULT_SAMPLE_INTERVAL_MS })] : []),
  ];
  const metrics = fanOut(sets, noConsumerMetrics);
  return log ? contained(metrics, noConsumerMetrics, log) : metrics;
}

/**
 * The relay's metrics: prom-client when a registry is given, OpenTelemetry when an SDK is
 * registered. Counting happens in the middle of a publish round; what a metric throws is logged
 * on `log` and ignored.
 */
export function relayMetricsFor(options: MetricsOptions | undefined, sources: RelayGaugeSources, log?: ThrottledLogger): RelayMetrics {
  const otelMeter = meter();
  const sets = [...(options ? [promRelayMetrics(options, sources)] : []), ...(otelMeter ? [otelRelayMetrics(otelMeter, sources)] : [])];
  const metrics = fanOut(sets, noRelayMetrics);
  return log ? contained(metrics, noRelayMetrics, log) : metrics;
}

/**
 * The metrics live on the application's registry (a metric of the same name registered by
 * someone else, a broken exporter...): what they throw while counting is logged and ignored,
 * never a reason to fail a batch's settling. Metrics off cost nothing more.
 */
function contained<M extends object>(metrics: M, none: M, log: ThrottledLogger): M {
  return metrics === none ? metrics : containMethods(metrics, "a metric", log);
}

/** One set of metric calls that makes each call on every set given (the no-op set for none). */
function fanOut<M extends object>(sets: readonly M[], none: M): M {
  if (sets.length === 0) return none;
  if (sets.length === 1) return sets[0]!;
  const calls = Object.keys(none).map((name) => [name, (...args: unknown[]) => {
    for (const set of sets) (set as Record<string, (...a: unknown[]) => void>)[name]!(...args);
  }]);
  return Object.fromEntries(calls) as M;
}
