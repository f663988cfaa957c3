import { callbackLogger } from "../core/contained-callback.js";
import { describeError } from "../core/errors.js";
import type { Instrumentation } from "../core/instrumentation.js";
import type { ThrottledLogger } from "../core/log-throttle.js";
import { type Logger, createJsonLogger, redactSecrets } from "../core/logger.js";
import { InboxPipeline } from "../core/pipeline.js";
import { reconnectPolicy } from "../core/retry-policy.js";
import type { ConsumerMetrics } from "../observability/inbox-metrics.js";
import { openTelemetryInstrumentation } from "../observability/message-trace.js";
import { consumerMetricsFor } from "../observability/metrics-for.js";
import { BackpressureGate } from "./backpressure-gate.js";
import { BatchScheduler } from "./batch-scheduler.js";
import { BrokerConnector } from "./broker-connection.js";
import type { BrokerSession } from "./broker-session.js";
import { prepareConsumerTopology } from "./consumer-topology.js";
import { DeliveryRepublisher } from "./delivery-republisher.js";
import { DeliverySettler } from "./delivery-settler.js";
import { type ConsumerSettings, type InboxConsumerOptions, consumerSettings, partitionMembership, pipelineOptions } from "./inbox-consumer-options.js";
import type { PartitionMembership } from "./partition-membership.js";
import type { Delivery, QueueConsumer } from "./queue-consumer.js";
import { ReconnectingSession } from "./reconnecting-session.js";
import { retryAttemptOf } from "./retry-attempt.js";

/**
 * What the parts call back on the consumer they serve. They call it only once the consumer is
 * built (a delivery, a session, a membership change), never while the parts are put together.
 */
export interface ConsumerSide {
  runBatch(batch: Delivery[]): Promise<void>;
  /** The backpressure gate opened again: start what waits. */
  gateOpened(): void;
  startConsuming(session: BrokerSession): Promise<void>;
  sessionLost(session: BrokerSession, what: string, error: Error | undefined, reconnecting: boolean): void;
  scheduleRebalance(): void;
  running(): boolean;
  /** Gives back what a channel holds unsettled, in delivery order (a batch the database refused, and everything behind it). */
  giveBack(consumer: QueueConsumer): Promise<void>;
  /** The node of the session in use, if one is open. */
  node(): string | undefined;
  heldPartitions(): number;
}

/** The collaborators of one InboxConsumer. */
export interface ConsumerParts<E, Tx> {
  settings: ConsumerSettings;
  logger: Logger;
  callbackLog: ThrottledLogger;
  instrumentation: Instrumentation;
  gate: BackpressureGate | undefined;
  metrics: ConsumerMetrics;
  pipeline: InboxPipeline<E, Tx>;
  membership: PartitionMembership | undefined;
  broker: ReconnectingSession;
  batches: BatchScheduler;
  settler: DeliverySettler;
}

/**
 * Puts a consumer's collaborators together, each after what it uses, so that the options are
 * checked in this order too: the consumer's settings, the backpressure, the metrics, the
 * pipeline (the handler and the store's options), the partitions.
 */
export function consumerParts<E, Tx>(options: InboxConsumerOptions<E, Tx>, consumer: ConsumerSide): ConsumerParts<E, Tx> {
  const settings = consumerSettings(options);
  const logger = options.logger ?? createJsonLogger();
  const callbackLog = callbackLogger(logger);
  const instrumentation = openTelemetryInstrumentation;
  const gate = options.backpressure ? new BackpressureGate(options.backpressure, { queue: options.queue, logger, onOpen: () => consumer.gateOpened() }) : undefined;
  const metrics = consumerMetricsFor(options.metrics, {
    queue: options.queue, handler: options.handler, store: options.store, partitioned: options.partitions !== undefined,
    node: () => consumer.node(), partitionsHeld: () => consumer.heldPartitions(), ...(gate ? { paused: () => gate.paused } : {}),
  }, callbackLog);
  const pipeline = new InboxPipeline(pipelineOptions(options, logger, metrics, instrumentation, (d) => retryAttemptOf(d.headers, d.queue) < settings.retryDelays.length));
  const connector = new BrokerConnector(options.url, {
    connectionName: options.connectionName ?? `rabbit-inbox ${pipeline.handlerName} ${process.pid}`,
  });
  const membership = options.partitions ? partitionMembership(options.queue, options.partitions, logger, () => consumer.scheduleRebalance()) : undefined;
  const broker = new ReconnectingSession({
    connector, confirmTimeoutMs: options.confirmTimeoutMs ?? 10_000, backoff: reconnectPolicy(options),
    prepare: ({ connection, publishChannel }) => prepareConsumerTopology(connection, publishChannel, {
      queue: options.queue, partitions: options.partitions, queueArguments: options.queueArguments, declare: options.declareTopology ?? true,
      quarantineQueue: settings.quarantineQueue, retryDelays: settings.retryDelays,
    }),
    activate: (session) => consumer.startConsuming(session),
    events: {
      lost: (session, what, error, reconnecting) => consumer.sessionLost(session, what, error, reconnecting),
      restored: (session, attempt) => logger.info("AMQP session restored", { queue: options.queue, node: session.node, attempt }),
      reconnectFailed: (attempt, error) => logger.warn("reconnect failed", { attempt, nodes: connector.nodes, error: redactSecrets(describeError(error)) }),
      error: ({ node }, source, error) => {
        if (source === "connection") logger.warn("AMQP connection error", { node, error: redactSecrets(error.message) });
        else logger.warn("AMQP publish channel error", { node, error: error.message });
      },
      blocked: ({ node }, reason) => logger.warn("broker blocked the connection (resource alarm): publishes wait", { node, reason }),
      unblocked: ({ node }) => logger.info("broker unblocked the connection", { node }),
    },
  });
  const batches = new BatchScheduler({
    batchSize: settings.batchSize, concurrency: settings.concurrency,
    run: (batch) => consumer.runBatch(batch), ...(gate ? { mayStart: () => gate.open } : {}),
    onRunFailed: (batch, error) => {
      // runBatch settles everything itself; reaching here is a bug. The deliveries stay
      // unacked and come back when their channels close.
      logger.error("unexpected failure settling a batch; closing its channels so the broker redelivers", { error: describeError(error) });
      for (const c of new Set(batch.map((d) => d.consumer))) {
        if (c.open) void c.channel.close().catch(() => undefined);
      }
    },
  });
  const settler = new DeliverySettler({
    queue: options.queue, logger, requeueDelayMs: settings.requeueDelayMs, giveBack: (c) => consumer.giveBack(c),
    republisher: new DeliveryRepublisher({
      handlerName: pipeline.handlerName, quarantineQueue: settings.quarantineQueue, retryDelays: settings.retryDelays, logger,
    }),
    isRunning: () => consumer.running(), hook: options.hook, onOutcome: options.onOutcome, metrics, callbackLog,
  });
  return { settings, logger, callbackLog, instrumentation, gate, metrics, pipeline, membership, broker, batches, settler };
}
