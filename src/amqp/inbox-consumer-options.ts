import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { InboxConfigError } from "../core/errors.js";
import { DURATION, POSITIVE_DURATION, POSITIVE_INTEGER, checkNumber, checkNumbers, numberOption } from "../core/option-checks.js";
import type { Backpressure } from "../core/backpressure.js";
import type { DeliveryInfo, InboxHandler } from "../core/handler.js";
import type { Logger } from "../core/logger.js";
import type { Outcome } from "../core/outcome.js";
import { type PipelineHook, type PipelineOptions, checkPipelineOptions } from "../core/pipeline.js";
import type { Store } from "../core/store-contract/store.js";
import type { MetricsOptions } from "../observability/inbox-metrics.js";
import type { Instrumentation, ProcessSpans, TransactionMetrics } from "../core/instrumentation.js";
import type { BrokerUrls } from "./broker-connection.js";
import { PartitionMembership } from "./partition-membership.js";

export interface InboxConsumerOptions<E, Tx> {
  /**
   * AMQP URL, e.g. `amqp://guest:guest@127.0.0.1:5672`, or the URLs of a cluster's nodes (an
   * array, or one string separated by commas). The consumer connects to the first node that
   * answers and, after losing it, to the others in turn. Passwords are never logged.
   */
  url: BrokerUrls;
  /** The work queue; with `partitions`, the base name of the partition queues and the exchange. */
  queue: string;
  /**
   * Partitioned, ordered consumption over several replicas (see docs/scaling.md). Default: none,
   * one work queue.
   */
  partitions?: PartitionOptions;
  store: Store<Tx>;
  handler: InboxHandler<E, Tx>;
  /**
   * Unacked deliveries the broker may push to this consumer. Default: twice `batchSize`, at
   * least 200 (so the next batch fills while one is in its transaction): 1000 by default.
   */
  prefetch?: number;
  /**
   * Deliveries per database transaction. Default 500 (batched). 1 is strict mode: one
   * transaction per message. A batch is flushed as soon as the process has no more deliveries
   * waiting, so latency stays low at low load. Each transaction costs the consumer a fixed
   * amount of work (round trips, acks), so larger batches cost less per message under load
   * (BENCHMARKS.md compares batch sizes) at the price of a longer settle latency under full
   * load, of holding row locks longer and of more redeliveries after a crash (up to a
   * prefetch's worth: counted and applied in batches the first time they come back, one
   * transaction per message after that).
   */
  batchSize?: number;
  /**
   * Transactions in flight at once. Default 1, which applies deliveries in queue order (an
   * `account.opened` before the adjustment that follows it). Raise it only when the handler does
   * not depend on order; it is capped by the store's `maxConcurrentTransactions` (SQLite: 1).
   */
  concurrency?: number;
  /** Quarantine queue. Default `<queue>.quarantine`. */
  quarantineQueue?: string;
  /**
   * Declare the work and quarantine queues (durable) at start. Default true. With false, both
   * must already exist: a passive check fails start() with the queue's name otherwise.
   */
  declareTopology?: boolean;
  /** Arguments for declaring the work queue, e.g. `quorumQueueArguments({ deliveryLimit: 20 })`. */
  queueArguments?: Record<string, unknown>;
  /**
   * Delays of the broker-side retries, in ms. When a message's transient failures outlive the
   * in-process retries, or its handler refuses it with RetryLaterError (`retryLater`), it is
   * republished (with confirms) to `<queue>.retry.<n>`, a queue whose TTL dead-letters it back to
   * the work queue, and the original is acked. After the last delay it is quarantined as
   * `retries_exhausted` (or with the handler's reason). Default [1000, 10000, 60000]; [] disables.
   */
  retryDelaysMs?: readonly number[];
  /** Poison threshold on `x-delivery-count` (quorum queues). Default 10. */
  maxDeliveries?: number;
  /** Shown by `rabbitmqctl list_connections client_properties`. Default `rabbit-inbox <handler> <pid>`. */
  connectionName?: string;
  /** Publisher-confirm timeout for quarantine publishes, in ms. Default 10 000. */
  confirmTimeoutMs?: number;
  /** Reconnect backoff after a lost connection or channel: first delay, in ms. Default 200. */
  reconnectBaseDelayMs?: number;
  /** Reconnect backoff cap, in ms. Default 10 000. */
  reconnectMaxDelayMs?: number;
  /** Pause before giving deliveries back to the broker when the database is unreachable. Default 1000 ms. */
  requeueDelayMs?: number;
  logger?: Logger;
  retry?: PipelineOptions<E, Tx>["retry"];
  decodeLimits?: PipelineOptions<E, Tx>["decodeLimits"];
  quarantineBodyCap?: number;
  /**
   * What a handler's `ctx.publish` may carry. Default: bodies up to 16 MiB (RabbitMQ 4's default
   * `max_message_size`). A publish over a limit, or one AMQP could not carry (a routing key over
   * 255 bytes, a header amqplib cannot encode), is refused at the call: its event is quarantined
   * as `invalid_publish`, and the rest of its batch applies.
   */
  publishLimits?: PipelineOptions<E, Tx>["publishLimits"];
  /**
   * Where the stale fence reads an event's time: the AMQP `timestamp` property (default),
   * else `eventTimeField` of the body. See docs/operations.md.
   */
  staleFence?: PipelineOptions<E, Tx>["staleFence"];
  /** Failure-window hook (fault injection, tests, drills). */
  hook?: PipelineHook;
  /**
   * Called after each delivery is settled, with its outcome and the time from its arrival in
   * this process to its settlement (for metrics).
   */
  onOutcome?: (outcome: Outcome, timing: { latencyMs: number }) => void;
  /**
   * Prometheus metrics on the application's prom-client registry (see docs/observability.md).
   * Default: none, and prom-client is never loaded.
   */
  metrics?: MetricsOptions;
  /**
   * Process spans, where an OpenTelemetry SDK is registered: `"batch"` makes one per batch, linked
   * to each delivery's producer span; `"message"` makes one per delivery, a child of its
   * producer's span, at several microseconds of CPU per message. Either way what a handler
   * publishes continues its event's trace. Default: `"batch"`, and `"message"` in strict mode
   * (`batchSize: 1`, where a batch is one message). See docs/observability.md.
   */
  processSpans?: ProcessSpans;
  /**
   * Holds off starting batches while something downstream asks it to, e.g.
   * `outboxBackpressure({ store })`: consumption pauses while the outbox's unsent rows are over
   * a bound. Default: none, the consumer never pauses. See docs/outbox.md.
   */
  backpressure?: Backpressure;
}

/**
 * Partitioned consumption: producers publish to an `x-consistent-hash` exchange with a routing
 * key per ordering key (e.g. `<tenant>/<account>`); it routes each key always to the same one
 * of `count` partition queues (quorum, single active consumer). The replicas of a consumer learn
 * each other through the broker and split the partitions evenly; a partition changes hands only
 * after its last owner settled (or gave back) every delivery it held, so per-key order holds
 * across replicas, node failures and replica failures.
 */
export interface PartitionOptions {
  /** Number of partition queues, `<queue>.p0` .. `<queue>.p<count-1>`. Fixed once producers use it. */
  count: number;
  /** The consistent-hash exchange producers publish to. Default: the `queue` name itself. */
  exchange?: string;
  /** How often a replica announces itself to the others, in ms. Default 500. */
  heartbeatMs?: number;
  /**
   * A replica not heard from for this long is gone and its partitions move, in ms. Default
   * 2500. Shorter moves partitions of a crashed replica sooner; it must outlast a reconnect
   * to another broker node, or partitions move away and back.
   */
  memberTimeoutMs?: number;
  /** This replica's id among the others. Default `<host>:<pid>:<random>`. */
  memberId?: string;
}

/** The options' values with their defaults, checked: a wrong one throws InboxConfigError before anything connects. */
export interface ConsumerSettings {
  prefetch: number;
  batchSize: number;
  concurrency: number;
  quarantineQueue: string;
  retryDelays: readonly number[];
  requeueDelayMs: number;
  processSpans: ProcessSpans;
}

export function consumerSettings<E, Tx>(options: InboxConsumerOptions<E, Tx>): ConsumerSettings {
  if (!options.queue) throw new InboxConfigError("queue is required");
  checkPipelineOptions(options);
  const batchSize = numberOption("batchSize", options.batchSize, 500, POSITIVE_INTEGER);
  const prefetch = numberOption("prefetch", options.prefetch, Math.min(65535, Math.max(200, 2 * batchSize)), { min: 1, max: 65535, integer: true });
  const retryDelays = options.retryDelaysMs ?? [1000, 10_000, 60_000];
  if (!Array.isArray(retryDelays)) throw new InboxConfigError("retryDelaysMs must be an array of delays in ms");
  retryDelays.forEach((d, i) => checkNumber(`retryDelaysMs[${i}]`, d, POSITIVE_INTEGER));
  checkNumbers("", options, {
    maxDeliveries: POSITIVE_INTEGER, confirmTimeoutMs: POSITIVE_DURATION, reconnectBaseDelayMs: POSITIVE_DURATION,
    reconnectMaxDelayMs: POSITIVE_DURATION, requeueDelayMs: DURATION,
  });
  checkNumbers("metrics.", options.metrics, { sampleIntervalMs: DURATION });
  const processSpans = options.processSpans ?? (batchSize === 1 ? "message" : "batch");
  if (processSpans !== "message" && processSpans !== "batch") throw new InboxConfigError(`processSpans must be "message" or "batch", got ${String(processSpans)}`);
  const { backpressure } = options;
  if (backpressure !== undefined) {
    if (typeof backpressure?.check !== "function") throw new InboxConfigError("backpressure must have a check() function (e.g. outboxBackpressure({ store }))");
    checkNumber("backpressure.checkIntervalMs", backpressure.checkIntervalMs, POSITIVE_DURATION);
  }
  const concurrency = numberOption("concurrency", options.concurrency, 1, POSITIVE_INTEGER);
  return {
    prefetch, batchSize, retryDelays, processSpans,
    concurrency: Math.min(concurrency, checkNumber("store.maxConcurrentTransactions", options.store.maxConcurrentTransactions, POSITIVE_INTEGER)),
    quarantineQueue: options.quarantineQueue ?? `${options.queue}.quarantine`,
    requeueDelayMs: options.requeueDelayMs ?? 1000,
  };
}

/** The pipeline's options, from the consumer's. */
export function pipelineOptions<E, Tx>(
  options: InboxConsumerOptions<E, Tx>, logger: Logger, metrics: TransactionMetrics, instrumentation: Instrumentation, canDelayRetry: (delivery: DeliveryInfo) => boolean,
): PipelineOptions<E, Tx> {
  const { store, handler, retry, decodeLimits, quarantineBodyCap, staleFence, hook, maxDeliveries, publishLimits } = options;
  return {
    store, handler, logger, metrics, instrumentation, canDelayRetry,
    ...(retry ? { retry } : {}), ...(decodeLimits ? { decodeLimits } : {}), ...(quarantineBodyCap !== undefined ? { quarantineBodyCap } : {}),
    ...(staleFence ? { staleFence } : {}), ...(hook ? { hook } : {}), ...(maxDeliveries !== undefined ? { maxDeliveries } : {}),
    ...(publishLimits ? { publishLimits } : {}),
  };
}

/** The replicas' membership of a partitioned consumer, its options checked. */
export function partitionMembership(queue: string, partitions: PartitionOptions, logger: Logger, onChange: () => void): PartitionMembership {
  checkNumber("partitions.count", partitions.count, { min: 1, max: 1000, integer: true });
  const heartbeatMs = numberOption("partitions.heartbeatMs", partitions.heartbeatMs, 500, POSITIVE_DURATION);
  const memberTimeoutMs = numberOption("partitions.memberTimeoutMs", partitions.memberTimeoutMs, 2500, POSITIVE_DURATION);
  if (!(memberTimeoutMs > 2 * heartbeatMs)) {
    throw new InboxConfigError(`partitions.memberTimeoutMs (${memberTimeoutMs}) must be more than twice heartbeatMs (${heartbeatMs}), or one late heartbeat moves partitions`);
  }
  return new PartitionMembership({
    exchange: `${queue}.members`,
    memberId: partitions.memberId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`,
    heartbeatMs, memberTimeoutMs, logger, onChange,
  });
}
