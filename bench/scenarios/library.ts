/**
 * The library's consumer over the bench's queue: `strict` (one transaction per message),
 * `batched` (the ledger's set-based handler with the library's defaults, no outbox) and
 * `observed` (batched with Prometheus metrics and OpenTelemetry tracing on).
 */
import { InboxConsumer, type InboxHandler } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import type { PostgresStore } from "../../src/store/postgres/index.js";
import type { LedgerEvent } from "../../examples/ledger/events.js";
import type { LibraryStore } from "../databases/bench-database.js";
import { AMQP_URL, LatencyRecorder } from "../harness.js";
import { benchProcessSpans, observedParts, producerTraceRatio, startObservability } from "../observability.js";

export async function runLibrary(
  queue: string, n: number, queueArguments: Record<string, unknown>,
  config: { store: LibraryStore; handler: InboxHandler<LedgerEvent, never>; concurrency?: number; batchSize?: number; prefetch?: number; observed?: boolean },
): Promise<{ seconds: number; latency: LatencyRecorder }> {
  const latency = new LatencyRecorder();
  let settled = 0;
  // The clock starts at the first delivery, as in runPlainConsumer: connecting and declaring the
  // topology is not part of the rate. A settled delivery was received
  // latencyMs before it settled; the earliest of those is the first delivery.
  let firstReceived = Infinity;
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => { resolveDone = resolve; });
  const observability = config.observed ? startObservability() : undefined;
  const consumer = new InboxConsumer({
    url: AMQP_URL, queue, store: config.store as PostgresStore, handler: config.handler, logger: silentLogger, queueArguments,
    ...(observability?.registry ? { metrics: { registry: observability.registry } } : {}),
    ...(observability && benchProcessSpans() ? { processSpans: benchProcessSpans() } : {}),
    ...(config.prefetch !== undefined ? { prefetch: config.prefetch } : {}),
    ...(config.batchSize !== undefined ? { batchSize: config.batchSize } : {}),
    ...(config.concurrency !== undefined ? { concurrency: config.concurrency } : {}),
    onOutcome: (outcome, timing) => {
      if (outcome.kind !== "applied") throw new Error(`unexpected outcome ${outcome.kind}`);
      latency.record(timing.latencyMs);
      firstReceived = Math.min(firstReceived, performance.now() - timing.latencyMs);
      if (++settled === n) resolveDone();
    },
  });
  await consumer.start();
  await done;
  const seconds = (performance.now() - firstReceived) / 1000;
  await consumer.stop();
  if (observability) {
    const { spans, series } = await observability.stop();
    const parts = observedParts();
    // Every message's process span when every producer trace is sampled, some when a fraction
    // is; a batch's span for every batch whatever the producers sampled.
    const ratio = producerTraceRatio();
    const expected = benchProcessSpans() !== "message" ? spans > 0 : ratio === 1 ? spans >= n : ratio === 0 || spans > 0;
    if (parts !== "metrics" && !expected) throw new Error(`observed: ${spans} spans exported for ${n} messages (BENCH_TRACE_RATIO ${ratio})`);
    if (parts !== "tracing" && series === 0) throw new Error("observed: no metric series registered");
  }
  return { seconds, latency };
}
