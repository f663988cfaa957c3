import { hasOperations } from "../store/operations.js";
import type { ConsumerMetrics, MetricsOptions, RelayMetrics } from "./inbox-metrics.js";
import { noConsumerMetrics, noRelayMetrics } from "./inbox-metrics.js";
import { promConsumerMetrics } from "./prom-consumer-metrics.js";
import { promRelayMetrics, type RelayGaugeSources } from "./prom-relay-metrics.js";

/** The consumer's metrics: the no-op set without a registry. */
export function consumerMetricsFor(
  options: MetricsOptions | undefined,
  consumer: { queue: string; handler: { name?: unknown } | undefined; store: object; partitioned: boolean; node: () => string | undefined; partitionsHeld: () => number },
): ConsumerMetrics {
  const handler = consumer.handler?.name;
  // Without a handler name the pipeline refuses the configuration right after: register nothing.
  if (!options || typeof handler !== "string" || handler === "") return noConsumerMetrics;
  const { store } = consumer;
  const operations = hasOperations(store) ? store.operations() : undefined;
  return promConsumerMetrics(options, {
    queue: consumer.queue, handler, node: consumer.node,
    ...(consumer.partitioned ? { partitionsHeld: consumer.partitionsHeld } : {}),
    ...(operations ? { quarantineCounts: () => operations.quarantineCounts() } : {}),
  });
}

/** The relay's metrics: the no-op set without a registry. */
export function relayMetricsFor(options: MetricsOptions | undefined, sources: RelayGaugeSources): RelayMetrics {
  return options ? promRelayMetrics(options, sources) : noRelayMetrics;
}
