import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Channel, ChannelModel, ConfirmChannel, ConsumeMessage, Options } from "amqplib";
import { InboxConfigError, describeError } from "../core/errors.js";
import type { EventKey } from "../core/event.js";
import type { InboxHandler } from "../core/handler.js";
import type { PipelineHook } from "../core/hooks.js";
import { type Logger, createJsonLogger, redactSecrets } from "../core/logger.js";
import type { Outcome, OutcomeKind } from "../core/outcome.js";
import { type IncomingMessage, InboxPipeline, type PipelineOptions } from "../core/pipeline.js";
import { backoffDelay, reconnectPolicy, sleep } from "../core/retry-policy.js";
import type { Store } from "../core/store.js";
import { type BrokerUrls, BrokerConnector } from "./broker-connection.js";
import { ConfirmedPublisher } from "./confirmed-publisher.js";
import { DeliveryTracker } from "./delivery-tracker.js";
import { assignPartitions } from "./partition-assignment.js";
import { PartitionMembership } from "./partition-membership.js";
import { bindPartitionQueues, partitionQueueArguments, partitionQueueName, prepareTopology, preparePartitionExchange, retryQueueName } from "./topology.js";
import { RETRY_ATTEMPT_HEADER, retryAttemptOf } from "./retry-attempt.js";

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
   * (BENCHMARKS.md, PostgreSQL: 200 was about 25% faster than 100, and 500 about 18% faster
   * than 200, at a median settle latency of about 50 ms under full load instead of 27 ms) at
   * the price of holding row locks longer and of more redeliveries after a crash (up to a
   * prefetch's worth, each then settled in a transaction of its own).
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

/** A delivery and the one channel allowed to settle it. */
interface Delivery {
  message: ConsumeMessage;
  consumer: QueueConsumer;
  /** performance.now() when the delivery reached this process. */
  receivedAt: number;
  /** The pipeline's view of it, decoded and fingerprinted on arrival (see onMessage). */
  incoming: IncomingMessage;
}

/** One connection with its confirm channel for quarantine publishes and its queue consumers. */
interface Session {
  id: number;
  connection: ChannelModel;
  /** `host:port` of the broker node. */
  node: string;
  publishChannel: ConfirmChannel;
  publisher: ConfirmedPublisher;
  /** By queue name: the work queue, or the partitions this replica holds. */
  consumers: Map<string, QueueConsumer>;
  open: boolean;
}

/**
 * One queue consumed on a channel of its own. Its delivery tags belong to that channel alone:
 * they are settled there, or not at all.
 */
interface QueueConsumer {
  queue: string;
  session: Session;
  channel: Channel;
  tracker: DeliveryTracker;
  consumerTag: string | undefined;
  open: boolean;
  /** Being handed over: new deliveries are left unacked for the next owner. */
  releasing: boolean;
  /** Deliveries of this channel in batches that have started. */
  inFlight: number;
  /** Resolved when inFlight reaches 0 or the channel closes. */
  idleWaiters: Array<() => void>;
}

export type OutcomeCounts = Record<OutcomeKind, number>;

/**
 * Consumes a queue (or the partitions of a partitioned queue) through the inbox pipeline: manual
 * acks, batches committed before any ack, quarantine published with confirms before the original
 * is acked, and reconnection with backoff (to the next broker node) after a connection or
 * channel loss. Deliveries of a lost channel are never acked on another one: the broker
 * redelivers them and the dedup record decides.
 */
export class InboxConsumer<E, Tx> {
  private readonly options: InboxConsumerOptions<E, Tx>;
  private readonly pipeline: InboxPipeline<E, Tx>;
  private readonly logger: Logger;
  private readonly batchSize: number;
  private readonly concurrency: number;
  private readonly quarantineQueue: string;
  private readonly counts: OutcomeCounts = { applied: 0, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 };
  private readonly retryDelays: readonly number[];
  private readonly connector: BrokerConnector;
  private readonly membership: PartitionMembership | undefined;
  private session: Session | undefined;
  private sessionCounter = 0;
  private pending: Delivery[] = [];
  private inFlight = 0;
  private flushScheduled = false;
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  private reconnecting: Promise<void> | undefined;
  private idleWaiters: Array<() => void> = [];
  /** Acks waiting for the end of this event-loop turn, per channel (see ack). */
  private readonly acksDue = new Map<QueueConsumer, Delivery[]>();
  private ackFlushScheduled = false;
  private requeueDelay: number;
  /** Partition hand-overs run one at a time, in the order membership changes were seen. */
  private rebalancing: Promise<void> = Promise.resolve();

  constructor(options: InboxConsumerOptions<E, Tx>) {
    if (!options.queue) throw new InboxConfigError("queue is required");
    const batchSize = options.batchSize ?? 500;
    const prefetch = options.prefetch ?? Math.min(65535, Math.max(200, 2 * batchSize));
    if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > 65535) throw new InboxConfigError(`prefetch must be an integer from 1 to 65535, got ${prefetch}`);
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new InboxConfigError(`batchSize must be a positive integer, got ${batchSize}`);
    this.options = { ...options, prefetch };
    this.logger = options.logger ?? createJsonLogger();
    this.batchSize = batchSize;
    this.concurrency = Math.min(options.concurrency ?? 1, options.store.maxConcurrentTransactions);
    this.quarantineQueue = options.quarantineQueue ?? `${options.queue}.quarantine`;
    this.requeueDelay = options.requeueDelayMs ?? 1000;
    this.retryDelays = options.retryDelaysMs ?? [1000, 10_000, 60_000];
    for (const d of this.retryDelays) {
      if (!Number.isSafeInteger(d) || d < 1) throw new InboxConfigError(`retryDelaysMs must hold positive integers (ms), got ${d}`);
    }
    this.pipeline = new InboxPipeline({
      store: options.store, handler: options.handler, logger: this.logger,
      ...(options.retry ? { retry: options.retry } : {}),
      ...(options.decodeLimits ? { decodeLimits: options.decodeLimits } : {}),
      ...(options.quarantineBodyCap !== undefined ? { quarantineBodyCap: options.quarantineBodyCap } : {}),
      ...(options.staleFence ? { staleFence: options.staleFence } : {}),
      ...(options.hook ? { hook: options.hook } : {}),
      ...(options.maxDeliveries !== undefined ? { maxDeliveries: options.maxDeliveries } : {}),
      canDelayRetry: (delivery) => retryAttemptOf(delivery.headers, delivery.queue) < this.retryDelays.length,
    });
    this.connector = new BrokerConnector(options.url, {
      connectionName: options.connectionName ?? `rabbit-inbox ${this.pipeline.handlerName} ${process.pid}`,
    });
    this.membership = options.partitions ? this.createMembership(options.partitions) : undefined;
  }

  private createMembership(partitions: PartitionOptions): PartitionMembership {
    const { count } = partitions;
    if (!Number.isSafeInteger(count) || count < 1 || count > 1000) throw new InboxConfigError(`partitions.count must be an integer from 1 to 1000, got ${count}`);
    const heartbeatMs = partitions.heartbeatMs ?? 500;
    const memberTimeoutMs = partitions.memberTimeoutMs ?? 2500;
    if (!(heartbeatMs > 0)) throw new InboxConfigError(`partitions.heartbeatMs must be positive, got ${heartbeatMs}`);
    if (!(memberTimeoutMs > 2 * heartbeatMs)) {
      throw new InboxConfigError(`partitions.memberTimeoutMs (${memberTimeoutMs}) must be more than twice heartbeatMs (${heartbeatMs}), or one late heartbeat moves partitions`);
    }
    return new PartitionMembership({
      exchange: `${this.options.queue}.members`,
      memberId: partitions.memberId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`,
      heartbeatMs, memberTimeoutMs, logger: this.logger,
      onChange: () => this.scheduleRebalance(),
    });
  }

  /** Outcome counts since start. */
  get outcomeCounts(): Readonly<OutcomeCounts> {
    return this.counts;
  }

  /** The partitions this replica consumes now (partitioned mode), sorted; [] otherwise. */
  get heldPartitions(): number[] {
    if (!this.options.partitions || !this.session?.open) return [];
    return [...this.session.consumers.keys()].map((queue) => this.partitionOf(queue)).sort((a, b) => a - b);
  }

  /** Connects, declares or checks the topology, and starts consuming. Rejects on a bad topology. */
  async start(): Promise<void> {
    if (this.state !== "idle") throw new InboxConfigError(`start() called on a consumer that is ${this.state}`);
    this.state = "running";
    try {
      await this.openSession();
      await this.rebalancing;
    } catch (error) {
      this.state = "stopped";
      throw error;
    }
    this.logger.info("consuming", {
      queue: this.options.queue, handler: this.pipeline.handlerName, store: this.options.store.dialect, node: this.session?.node,
      prefetch: this.options.prefetch, batchSize: this.batchSize, concurrency: this.concurrency,
      ...(this.options.partitions ? { partitions: this.options.partitions.count, held: this.heldPartitions, member: this.membership?.memberId } : {}),
    });
  }

  /**
   * Stops taking deliveries, finishes and settles every delivery already started, then closes
   * the channels and the connection. Safe to call more than once. A single work queue also
   * finishes the deliveries it received; partitions give those back unacked instead (another
   * replica may take a partition as soon as it is cancelled, so nothing of it may still be
   * applied here after that).
   */
  async stop(): Promise<void> {
    if (this.state === "stopped" || this.state === "idle") { this.state = "stopped"; return; }
    if (this.state === "stopping") return this.whenIdle();
    this.state = "stopping";
    const session = this.session;
    if (this.membership) {
      // Tell the others first: they subscribe and wait while this replica hands over.
      await this.membership.leave();
      await this.rebalancing;
      if (session?.open) await Promise.all([...session.consumers.values()].map((c) => this.release(c)));
    } else {
      for (const consumer of session?.open ? session.consumers.values() : []) {
        if (!consumer.consumerTag) continue;
        await consumer.channel.cancel(consumer.consumerTag).catch((error: unknown) => {
          this.logger.warn("cancel failed while stopping", { error: describeError(error) });
        });
      }
    }
    this.flush();
    await this.whenIdle();
    this.flushAcks();
    this.state = "stopped";
    // Closed even when the session was lost meanwhile (the broker closed a channel during the
    // stop): its connection may still be open, and would keep the process alive.
    if (session) {
      session.open = false;
      // Close the channels before the connection: amqplib writes each channel's frames through
      // its own buffer and multiplexes them, so a connection-level Close can overtake acks still
      // buffered on the consuming channel, and the broker then requeues deliveries whose effects
      // committed (seen here: up to a prefetch's worth). A channel's Close queues behind its acks.
      for (const consumer of session.consumers.values()) await this.closeConsumer(consumer);
      await session.publishChannel.close().catch(() => undefined);
      await session.connection.close().catch(() => undefined);
    }
    this.logger.info("stopped", { queue: this.options.queue, ...this.counts });
  }

  private wakeIdleWaiters(): void {
    if (this.inFlight === 0 && this.pending.length === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  private whenIdle(): Promise<void> {
    if (this.inFlight === 0 && this.pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async openSession(): Promise<void> {
    const { queue } = this.options;
    const { connection, node } = await this.connector.connect();
    let session: Session | undefined;
    try {
      const publishChannel = await connection.createConfirmChannel();
      session = {
        id: ++this.sessionCounter, connection, node, publishChannel,
        publisher: new ConfirmedPublisher(publishChannel, this.options.confirmTimeoutMs ?? 10_000),
        consumers: new Map(), open: true,
      };
      const s = session;
      connection.on("error", (error: Error) => this.logger.warn("AMQP connection error", { node, error: redactSecrets(error.message) }));
      connection.on("close", (error?: Error) => this.sessionLost(s, "connection closed", error));
      connection.on("blocked", (reason: string) => this.logger.warn("broker blocked the connection (resource alarm): publishes wait", { node, reason }));
      connection.on("unblocked", () => this.logger.info("broker unblocked the connection", { node }));
      publishChannel.on("error", (error: Error) => this.logger.warn("AMQP publish channel error", { node, error: error.message }));
      publishChannel.on("close", (error?: Error) => this.sessionLost(s, "publish channel closed", error));

      const declare = this.options.declareTopology ?? true;
      const exchange = this.options.partitions ? this.options.partitions.exchange ?? queue : undefined;
      if (exchange !== undefined) await preparePartitionExchange(connection, exchange, declare);
      for (const workQueue of this.workQueues()) {
        await prepareTopology(connection, publishChannel, {
          queue: workQueue, quarantineQueue: this.quarantineQueue,
          queueArguments: this.options.partitions ? partitionQueueArguments(this.options.queueArguments) : this.options.queueArguments,
          retryQueues: this.retryDelays.map((delayMs, i) => ({ name: retryQueueName(workQueue, i + 1), delayMs })),
          declare,
        });
      }
      if (exchange !== undefined && declare) await bindPartitionQueues(connection, exchange, this.workQueues());
      // A reconnect that finished after stop() began must not start consuming again.
      if (this.state !== "running") throw new Error("the consumer stopped while this session was opening");
      // From here on a loss of this session is a loss to recover from, not a failed start.
      this.session = s;
      if (this.membership) {
        await this.membership.attach(connection);
        this.scheduleRebalance();
      } else {
        await this.consume(s, queue);
      }
    } catch (error) {
      if (session) session.open = false;
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  /** The queues deliveries come from: the work queue, or every partition queue. */
  private workQueues(): string[] {
    const { queue, partitions } = this.options;
    if (!partitions) return [queue];
    return Array.from({ length: partitions.count }, (_, p) => partitionQueueName(queue, p));
  }

  private partitionOf(queue: string): number {
    return Number(queue.slice(queue.lastIndexOf(".p") + 2));
  }

  /** Opens a channel of its own for `queue` and consumes it. */
  private async consume(session: Session, queue: string): Promise<void> {
    const channel = await session.connection.createChannel();
    const consumer: QueueConsumer = {
      queue, session, channel, tracker: new DeliveryTracker(), consumerTag: undefined,
      open: true, releasing: false, inFlight: 0, idleWaiters: [],
    };
    channel.on("error", (error: Error) => this.logger.warn("AMQP channel error", { queue, node: session.node, error: error.message }));
    channel.on("close", (error?: Error) => {
      // A channel this consumer closed itself (a hand-over, a stop) is not a loss.
      if (!consumer.open) return;
      this.sessionLost(session, `consume channel of ${queue} closed`, error);
    });
    session.consumers.set(queue, consumer);
    await channel.prefetch(this.options.prefetch!);
    const { consumerTag } = await channel.consume(queue, (message) => this.onMessage(consumer, message), { noAck: false });
    consumer.consumerTag = consumerTag;
  }

  /**
   * Hands a partition over: deliveries not started are dropped (they stay unacked), the batches
   * holding its deliveries finish and their acks go out, and only then is its channel closed.
   * The broker then requeues what this replica did not settle, in order, and single active
   * consumer gives the partition to the next replica: nothing of it is applied here after that.
   */
  private async release(consumer: QueueConsumer): Promise<void> {
    if (!consumer.open) return;
    consumer.releasing = true;
    this.pending = this.pending.filter((d) => d.consumer !== consumer);
    this.wakeIdleWaiters();
    if (consumer.inFlight > 0) await new Promise<void>((resolve) => consumer.idleWaiters.push(resolve));
    this.flushAcks();
    await this.closeConsumer(consumer);
    consumer.session.consumers.delete(consumer.queue);
  }

  private async closeConsumer(consumer: QueueConsumer): Promise<void> {
    if (!consumer.open) return;
    consumer.open = false;
    await consumer.channel.close().catch(() => undefined);
  }

  private scheduleRebalance(): void {
    this.rebalancing = this.rebalancing.then(() => this.rebalance()).catch((error: unknown) => {
      // The session is lost (a reconnect follows and rebalances), or a subscribe failed: close
      // the connection so that the reconnect starts from a clean state.
      this.logger.warn("partition hand-over failed; reconnecting", { error: describeError(error) });
      const session = this.session;
      if (session?.open) this.sessionLost(session, "partition hand-over failed", error instanceof Error ? error : undefined);
    });
  }

  /** Releases the partitions this replica no longer owns, then subscribes to those it gained. */
  private async rebalance(): Promise<void> {
    const membership = this.membership!;
    const session = this.session;
    if (this.state !== "running" || !session?.open) return;
    const members = membership.members();
    const owned = new Set(assignPartitions(members, this.options.partitions!.count, membership.memberId).map((p) => partitionQueueName(this.options.queue, p)));
    const released: number[] = [];
    const acquired: number[] = [];
    for (const consumer of [...session.consumers.values()]) {
      if (owned.has(consumer.queue)) continue;
      await this.release(consumer);
      released.push(this.partitionOf(consumer.queue));
    }
    for (const queue of owned) {
      if (this.state !== "running" || !session.open) return;
      if (session.consumers.has(queue)) continue;
      await this.consume(session, queue);
      acquired.push(this.partitionOf(queue));
    }
    if (released.length > 0 || acquired.length > 0) {
      this.logger.info("partitions rebalanced", {
        queue: this.options.queue, member: membership.memberId, members: members.length,
        held: this.heldPartitions, released, acquired, node: session.node,
      });
    }
  }

  private onMessage(consumer: QueueConsumer, message: ConsumeMessage | null): void {
    if (message === null) {
      // The broker cancelled the consumer (queue deleted, failover): amqplib passes null.
      this.logger.warn("broker cancelled the consumer; reconnecting", { queue: consumer.queue });
      this.sessionLost(consumer.session, "consumer cancelled by broker");
      return;
    }
    consumer.tracker.delivered(message.fields.deliveryTag);
    // Handed over: left unacked, the broker requeues it for the next owner when the channel closes.
    if (consumer.releasing || !consumer.open) return;
    // Decoded and fingerprinted now, while the batch before it waits on the database, rather
    // than when its own batch starts.
    const incoming = this.toIncoming(message, consumer.queue);
    this.pipeline.prepareAhead(incoming);
    this.pending.push({ message, consumer, receivedAt: performance.now(), incoming });
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.pending.length >= this.batchSize) {
      this.flush();
    } else if (!this.flushScheduled) {
      this.flushScheduled = true;
      // Deliveries read from one socket chunk arrive in one turn of the event loop; flushing on
      // the next turn batches them all without waiting for a timer.
      setImmediate(() => {
        this.flushScheduled = false;
        this.flush();
      });
    }
  }

  private flush(): void {
    while (this.pending.length > 0 && this.inFlight < this.concurrency) {
      const batch = this.pending.splice(0, this.batchSize);
      this.inFlight++;
      for (const d of batch) d.consumer.inFlight++;
      this.runBatch(batch)
        .catch((error: unknown) => {
          // runBatch settles everything itself; reaching here is a bug. The deliveries stay
          // unacked and come back when their channels close.
          this.logger.error("unexpected failure settling a batch; closing its channels so the broker redelivers", { error: describeError(error) });
          for (const consumer of new Set(batch.map((d) => d.consumer))) {
            if (consumer.open) void consumer.channel.close().catch(() => undefined);
          }
        })
        .finally(() => {
          this.inFlight--;
          for (const d of batch) this.deliveryDone(d.consumer);
          if (this.pending.length > 0) this.flush();
          this.wakeIdleWaiters();
        });
    }
  }

  private deliveryDone(consumer: QueueConsumer): void {
    consumer.inFlight--;
    if (consumer.inFlight === 0) for (const resolve of consumer.idleWaiters.splice(0)) resolve();
  }

  /** A batch holds only deliveries of open channels: a lost channel's pending ones are dropped at once (sessionLost). */
  private async runBatch(batch: Delivery[]): Promise<void> {
    const outcomes = await this.pipeline.process(batch.map((d) => d.incoming));
    await this.settle(batch, outcomes);
  }

  private toIncoming(message: ConsumeMessage, queue: string): IncomingMessage {
    const { properties, fields } = message;
    const headers = (properties.headers ?? {}) as Record<string, unknown>;
    const count = headers["x-delivery-count"];
    return {
      body: message.content,
      contentType: typeof properties.contentType === "string" ? properties.contentType : undefined,
      contentEncoding: typeof properties.contentEncoding === "string" ? properties.contentEncoding : undefined,
      delivery: {
        queue,
        redelivered: fields.redelivered,
        deliveryCount: typeof count === "number" ? count : undefined,
        messageId: typeof properties.messageId === "string" ? properties.messageId : undefined,
        timestamp: typeof properties.timestamp === "number" ? new Date(properties.timestamp * 1000) : undefined,
        headers,
      },
      describeProperties: () => safeJson({ fields: { exchange: fields.exchange, routingKey: fields.routingKey, redelivered: fields.redelivered }, properties }),
    };
  }

  private async settle(batch: Delivery[], decided: Outcome[]): Promise<void> {
    // Quarantined and delayed messages must be safely in their queue before their originals go;
    // one whose publish was not confirmed is not acked but given back to the broker.
    let outcomes = decided;
    if (decided.some((o) => o.kind === "quarantined" || o.kind === "delayed")) {
      const published = await Promise.all(
        decided.map((o, i) =>
          o.kind === "quarantined" ? this.publishQuarantine(batch[i]!, o)
          : o.kind === "delayed" ? this.publishDelayedRetry(batch[i]!, o)
          : Promise.resolve(true)),
      );
      outcomes = decided.map((o, i): Outcome => (published[i] ? o : { kind: "requeue", key: o.key, error: new Error("publish not confirmed") }));
    }
    const acks = new Map<QueueConsumer, Delivery[]>();
    const requeues: Delivery[] = [];
    outcomes.forEach((o, i) => {
      const d = batch[i]!;
      if (o.kind === "requeue") requeues.push(d);
      else {
        const list = acks.get(d.consumer) ?? [];
        list.push(d);
        acks.set(d.consumer, list);
      }
    });
    if (requeues.length > 0) {
      // Give the database (or broker) a moment before the broker hands them out again; a
      // stopping consumer gives them back at once.
      if (this.state === "running") await sleep(this.requeueDelay);
      this.requeueDelay = Math.min(this.requeueDelay * 2, 30_000);
      for (const d of requeues) this.nack(d);
    } else {
      this.requeueDelay = this.options.requeueDelayMs ?? 1000;
    }
    for (const [consumer, deliveries] of acks) this.ack(consumer, deliveries);
    // A failure-window hook sees its acks on the wire already ("after-ack" means sent).
    if (this.options.hook) this.flushAcks();
    const now = performance.now();
    outcomes.forEach((o, i) => {
      this.counts[o.kind]++;
      this.options.onOutcome?.(o, { latencyMs: now - batch[i]!.receivedAt });
    });
    this.logSettled(batch, outcomes);
    if (this.options.hook) {
      const acked = outcomes.flatMap((o) => (o.kind !== "requeue" ? [o.key] : []));
      if (acked.length > 0) await this.options.hook("after-ack", acked);
    }
  }

  private async publishQuarantine(delivery: Delivery, outcome: Extract<Outcome, { kind: "quarantined" }>): Promise<boolean> {
    const { consumer, message } = delivery;
    const { session } = consumer;
    if (!session.open) return false;
    const key: EventKey | null = outcome.key;
    try {
      await session.publisher.publish("", this.quarantineQueue, message.content, {
        ...copiedProperties(message),
        headers: {
          ...message.properties.headers,
          "x-rabbit-inbox-reason": outcome.reason,
          "x-rabbit-inbox-detail": outcome.detail.slice(0, 1000),
          "x-rabbit-inbox-handler": this.pipeline.handlerName,
          "x-rabbit-inbox-original-queue": consumer.queue,
          ...(key ? { "x-rabbit-inbox-tenant": key.tenant, "x-rabbit-inbox-event-id": key.eventId } : {}),
          ...(outcome.record.fingerprint ? { "x-rabbit-inbox-fingerprint": outcome.record.fingerprint } : {}),
          ...(outcome.record.storedFingerprint ? { "x-rabbit-inbox-stored-fingerprint": outcome.record.storedFingerprint } : {}),
        },
      });
      this.logger.warn("event quarantined", {
        handler: this.pipeline.handlerName, reason: outcome.reason, tenant: key?.tenant, eventId: key?.eventId,
        detail: outcome.detail.slice(0, 300), quarantineQueue: this.quarantineQueue,
      });
      return true;
    } catch (error) {
      this.logger.error("quarantine publish not confirmed; the original stays unacked and comes back", {
        reason: outcome.reason, tenant: key?.tenant, eventId: key?.eventId, error: describeError(error),
      });
      return false;
    }
  }

  /**
   * A debug line per settled batch, and an info line naming each redelivered delivery with its
   * outcome: after a crash between commit and ack, this is where an operator (or a drill) sees
   * the redelivery arrive and the dedup record turn it into a duplicate instead of a second effect.
   */
  private logSettled(batch: Delivery[], outcomes: Outcome[]): void {
    const tally: OutcomeCounts = { applied: 0, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 };
    const redelivered: Array<{ tenant: string | undefined; eventId: string | undefined; outcome: OutcomeKind }> = [];
    outcomes.forEach((o, i) => {
      const kind = o.kind;
      tally[kind]++;
      if (batch[i]!.message.fields.redelivered) redelivered.push({ tenant: o.key?.tenant, eventId: o.key?.eventId, outcome: kind });
    });
    const queue = this.options.queue;
    this.logger.debug("batch settled", { queue, messages: outcomes.length, ...tally, redelivered: redelivered.length });
    if (redelivered.length > 0) {
      this.logger.info("redelivered deliveries settled", { queue, redelivered: redelivered.length, events: redelivered.slice(0, 50) });
    }
  }

  private async publishDelayedRetry(delivery: Delivery, outcome: Extract<Outcome, { kind: "delayed" }>): Promise<boolean> {
    const { consumer, message } = delivery;
    const { session } = consumer;
    if (!session.open) return false;
    const headers = (message.properties.headers ?? {}) as Record<string, unknown>;
    const attempt = retryAttemptOf(headers, consumer.queue) + 1;
    // Back to the queue it came from (its own partition), after the delay.
    const target = retryQueueName(consumer.queue, attempt);
    try {
      await session.publisher.publish("", target, message.content, {
        ...copiedProperties(message),
        headers: { ...headers, [RETRY_ATTEMPT_HEADER]: attempt, "x-rabbit-inbox-last-error": outcome.detail.slice(0, 500) },
      });
      this.logger.warn("delayed retry scheduled", {
        handler: this.pipeline.handlerName, tenant: outcome.key?.tenant, eventId: outcome.key?.eventId,
        attempt, delayMs: this.retryDelays[attempt - 1], retryQueue: target,
      });
      return true;
    } catch (error) {
      this.logger.error("delayed-retry publish not confirmed; the original stays unacked and comes back", {
        tenant: outcome.key?.tenant, eventId: outcome.key?.eventId, error: describeError(error),
      });
      return false;
    }
  }

  /**
   * Queues acks until the end of this turn of the event loop, so that the transactions that
   * committed in the same turn (strict mode runs several at once) share one multiple-ack frame
   * instead of one write each. Nacks are never deferred: one sent before a deferred
   * multiple-ack that spans its tag is already off the channel, never acked by it.
   */
  private ack(consumer: QueueConsumer, deliveries: Delivery[]): void {
    const queued = this.acksDue.get(consumer);
    if (queued) queued.push(...deliveries);
    else this.acksDue.set(consumer, [...deliveries]);
    if (!this.ackFlushScheduled) {
      this.ackFlushScheduled = true;
      setImmediate(() => this.flushAcks());
    }
  }

  /** Sends every queued ack now. */
  private flushAcks(): void {
    this.ackFlushScheduled = false;
    const due = [...this.acksDue];
    this.acksDue.clear();
    for (const [consumer, deliveries] of due) this.sendAcks(consumer, deliveries);
  }

  /** Acks on the channel that delivered them, and only there (another channel's tag 7 is another message). */
  private sendAcks(consumer: QueueConsumer, deliveries: Delivery[]): void {
    if (!consumer.open) {
      this.logger.debug("channel closed before ack; the broker will redeliver and the dedup record decides", { queue: consumer.queue, deliveries: deliveries.length });
      return;
    }
    const byTag = new Map(deliveries.map((d) => [d.message.fields.deliveryTag, d.message]));
    const plan = consumer.tracker.planAcks([...byTag.keys()]);
    try {
      if (plan.multipleUpTo !== null) consumer.channel.ack(byTag.get(plan.multipleUpTo)!, true);
      for (const tag of plan.singles) consumer.channel.ack(byTag.get(tag)!, false);
    } catch (error) {
      // IllegalOperationError: the channel closed under us. Nothing to do: redelivery is safe.
      this.logger.warn("ack failed; the broker will redeliver and the dedup record decides", { error: describeError(error) });
    }
  }

  private nack(delivery: Delivery): void {
    const { consumer, message } = delivery;
    if (!consumer.open) return;
    consumer.tracker.settled(message.fields.deliveryTag);
    try {
      consumer.channel.nack(message, false, true);
    } catch (error) {
      this.logger.warn("nack failed; the broker will redeliver when the channel closes", { error: describeError(error) });
    }
  }

  private sessionLost(session: Session, what: string, error?: Error): void {
    if (!session.open) return;
    // A session still being opened: openSession's caller reports the failure (start() rejects,
    // the reconnect loop tries again).
    if (session !== this.session) { session.open = false; return; }
    session.open = false;
    for (const consumer of session.consumers.values()) {
      consumer.open = false;
      // A hand-over waiting on this channel has nothing left to wait for: the broker requeues.
      for (const resolve of consumer.idleWaiters.splice(0)) resolve();
    }
    this.membership?.detach();
    // Deliveries of this connection that have not started are dropped: the broker requeues them.
    this.pending = this.pending.filter((d) => d.consumer.session !== session);
    this.wakeIdleWaiters();
    if (this.state !== "running") return;
    this.logger.warn("AMQP session lost; reconnecting", { what, node: session.node, error: error ? redactSecrets(error.message) : undefined, session: session.id });
    void session.connection.close().catch(() => undefined);
    this.reconnecting ??= this.reconnect().finally(() => { this.reconnecting = undefined; });
  }

  private async reconnect(): Promise<void> {
    const policy = reconnectPolicy(this.options);
    for (let attempt = 1; this.state === "running"; attempt++) {
      await sleep(backoffDelay(policy, attempt));
      if (this.state !== "running") return;
      try {
        await this.openSession();
        this.logger.info("AMQP session restored", { queue: this.options.queue, node: this.session?.node, attempt });
        return;
      } catch (error) {
        if (this.state !== "running") return;
        this.logger.warn("reconnect failed", { attempt, nodes: this.connector.nodes, error: redactSecrets(describeError(error)) });
      }
    }
  }
}

/**
 * What a quarantine or delayed-retry copy keeps of the original's properties: what an operator
 * needs to read and replay it, what the pipeline reads when the copy comes back (content type and
 * encoding, the timestamp of the stale fence), and persistence. Only properties the original has.
 */
function copiedProperties(message: ConsumeMessage): Options.Publish {
  const p = message.properties as unknown as Record<string, unknown>;
  return {
    persistent: true,
    ...(typeof p.contentType === "string" ? { contentType: p.contentType } : {}),
    ...(typeof p.contentEncoding === "string" ? { contentEncoding: p.contentEncoding } : {}),
    ...(typeof p.messageId === "string" ? { messageId: p.messageId } : {}),
    ...(typeof p.type === "string" ? { type: p.type } : {}),
    ...(typeof p.timestamp === "number" ? { timestamp: p.timestamp } : {}),
  };
}

function safeJson(value: unknown): string {
  try {
    // The replacer is handed a Buffer already turned into `{ type, data: [...] }` by its toJSON
    // (a number per byte): the holder's own value tells bytes apart, and only their count is kept.
    return JSON.stringify(value, function (this: Record<string, unknown>, key: string, v: unknown) {
      const own = this[key];
      return Buffer.isBuffer(own) ? `<${own.length} bytes>` : typeof v === "bigint" ? v.toString() : v;
    });
  } catch {
    return "{}";
  }
}
