import amqp from "amqplib";
import type { Channel, ChannelModel, ConfirmChannel, ConsumeMessage } from "amqplib";
import { InboxConfigError, describeError } from "../core/errors.js";
import type { EventKey } from "../core/event.js";
import type { InboxHandler } from "../core/handler.js";
import type { PipelineHook } from "../core/hooks.js";
import { type Logger, createJsonLogger, redactSecrets } from "../core/logger.js";
import type { Outcome, OutcomeKind } from "../core/outcome.js";
import { type IncomingMessage, InboxPipeline, type PipelineOptions } from "../core/pipeline.js";
import { sleep } from "../core/retry-policy.js";
import type { Store } from "../core/store.js";
import { ConfirmedPublisher } from "./confirmed-publisher.js";
import { DeliveryTracker } from "./delivery-tracker.js";
import { prepareTopology, retryQueueName } from "./topology.js";

export interface InboxConsumerOptions<E, Tx> {
  /** AMQP URL, e.g. `amqp://guest:guest@127.0.0.1:5672`. Its password is never logged. */
  url: string;
  /** The work queue. */
  queue: string;
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
   * in-process retries, it is republished (with confirms) to `<queue>.retry.<n>`, a queue whose
   * TTL dead-letters it back to the work queue, and the original is acked. After the last delay
   * it is quarantined as `retries_exhausted`. Default [1000, 10000, 60000]; [] disables.
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
   * Where the stale fence (S13) reads an event's time: the AMQP `timestamp` property (default),
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

/** A delivery and the one channel allowed to settle it (S7). */
interface Delivery {
  message: ConsumeMessage;
  session: Session;
  /** performance.now() when the delivery reached this process. */
  receivedAt: number;
  /** The pipeline's view of it, decoded and fingerprinted on arrival (see onMessage). */
  incoming: IncomingMessage;
}

/** One connection with its consuming channel and its confirm channel for quarantine publishes. */
interface Session {
  id: number;
  connection: ChannelModel;
  channel: Channel;
  publishChannel: ConfirmChannel;
  publisher: ConfirmedPublisher;
  tracker: DeliveryTracker;
  consumerTag: string | undefined;
  open: boolean;
}

export type OutcomeCounts = Record<OutcomeKind, number>;

/**
 * Consumes a queue through the inbox pipeline: manual acks, batches committed before any ack,
 * quarantine published with confirms before the original is acked, and reconnection with
 * backoff after a connection or channel loss. Deliveries of a lost channel are never acked on
 * another one: the broker redelivers them and the dedup record decides.
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
  private session: Session | undefined;
  private sessionCounter = 0;
  private pending: Delivery[] = [];
  private inFlight = 0;
  private flushScheduled = false;
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  private reconnecting: Promise<void> | undefined;
  private idleWaiters: Array<() => void> = [];
  /** Acks waiting for the end of this event-loop turn, per session (see ack). */
  private readonly acksDue = new Map<Session, Delivery[]>();
  private ackFlushScheduled = false;
  private requeueDelay: number;

  constructor(options: InboxConsumerOptions<E, Tx>) {
    if (!options.url) throw new InboxConfigError("url is required (the AMQP URL)");
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
      canDelayRetry: (delivery) => retryAttemptOf(delivery.headers) < this.retryDelays.length,
    });
  }

  /** Outcome counts since start. */
  get outcomeCounts(): Readonly<OutcomeCounts> {
    return this.counts;
  }

  /** Connects, declares or checks the topology, and starts consuming. Rejects on a bad topology. */
  async start(): Promise<void> {
    if (this.state !== "idle") throw new InboxConfigError(`start() called on a consumer that is ${this.state}`);
    this.state = "running";
    try {
      await this.openSession();
    } catch (error) {
      this.state = "stopped";
      throw error;
    }
    this.logger.info("consuming", {
      queue: this.options.queue, handler: this.pipeline.handlerName, store: this.options.store.dialect,
      prefetch: this.options.prefetch, batchSize: this.batchSize, concurrency: this.concurrency,
    });
  }

  /**
   * Stops taking deliveries, finishes and settles every delivery already received, then closes
   * the channels and the connection. Safe to call more than once.
   */
  async stop(): Promise<void> {
    if (this.state === "stopped" || this.state === "idle") { this.state = "stopped"; return; }
    if (this.state === "stopping") return this.whenIdle();
    this.state = "stopping";
    const session = this.session;
    if (session?.open && session.consumerTag) {
      await session.channel.cancel(session.consumerTag).catch((error: unknown) => {
        this.logger.warn("cancel failed while stopping", { error: describeError(error) });
      });
    }
    this.flush();
    await this.whenIdle();
    this.flushAcks();
    this.state = "stopped";
    if (session?.open) {
      session.open = false;
      // Close the channels before the connection: amqplib writes each channel's frames through
      // its own buffer and multiplexes them, so a connection-level Close can overtake acks still
      // buffered on the consuming channel, and the broker then requeues deliveries whose effects
      // committed (seen here: up to a prefetch's worth). A channel's Close queues behind its acks.
      await session.channel.close().catch(() => undefined);
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
    const { url, queue } = this.options;
    const connection = await amqp.connect(url, { clientProperties: { connection_name: this.options.connectionName ?? `rabbit-inbox ${this.pipeline.handlerName} ${process.pid}` } });
    let session: Session | undefined;
    try {
      const channel = await connection.createChannel();
      const publishChannel = await connection.createConfirmChannel();
      session = {
        id: ++this.sessionCounter, connection, channel, publishChannel,
        publisher: new ConfirmedPublisher(publishChannel, this.options.confirmTimeoutMs ?? 10_000),
        tracker: new DeliveryTracker(), consumerTag: undefined, open: true,
      };
      const s = session;
      const lost = (what: string) => (error?: Error) => this.sessionLost(s, what, error);
      connection.on("error", (error: Error) => this.logger.warn("AMQP connection error", { error: redactSecrets(error.message) }));
      connection.on("close", lost("connection closed"));
      connection.on("blocked", (reason: string) => this.logger.warn("broker blocked the connection (resource alarm): publishes wait", { reason }));
      connection.on("unblocked", () => this.logger.info("broker unblocked the connection"));
      channel.on("error", (error: Error) => this.logger.warn("AMQP channel error", { error: error.message }));
      channel.on("close", lost("consume channel closed"));
      publishChannel.on("error", (error: Error) => this.logger.warn("AMQP publish channel error", { error: error.message }));
      publishChannel.on("close", lost("publish channel closed"));

      await prepareTopology(connection, channel, {
        queue, queueArguments: this.options.queueArguments, quarantineQueue: this.quarantineQueue,
        retryQueues: this.retryDelays.map((delayMs, i) => ({ name: retryQueueName(queue, i + 1), delayMs })),
        declare: this.options.declareTopology ?? true,
      });
      await channel.prefetch(this.options.prefetch!);
      const { consumerTag } = await channel.consume(queue, (message) => this.onMessage(s, message), { noAck: false });
      s.consumerTag = consumerTag;
      this.session = s;
    } catch (error) {
      if (session) session.open = false;
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  private onMessage(session: Session, message: ConsumeMessage | null): void {
    if (message === null) {
      // The broker cancelled the consumer (queue deleted, failover): amqplib passes null.
      this.logger.warn("broker cancelled the consumer; reconnecting", { queue: this.options.queue });
      this.sessionLost(session, "consumer cancelled by broker");
      return;
    }
    session.tracker.delivered(message.fields.deliveryTag);
    // Decoded and fingerprinted now, while the batch before it waits on the database, rather
    // than when its own batch starts.
    const incoming = this.toIncoming(message);
    this.pipeline.prepareAhead(incoming);
    this.pending.push({ message, session, receivedAt: performance.now(), incoming });
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
      this.runBatch(batch)
        .catch((error: unknown) => {
          // runBatch settles everything itself; reaching here is a bug. The deliveries stay
          // unacked and come back when the channel closes.
          this.logger.error("unexpected failure settling a batch; closing the channel so the broker redelivers", { error: describeError(error) });
          const session = batch[0]?.session;
          if (session?.open) void session.channel.close().catch(() => undefined);
        })
        .finally(() => {
          this.inFlight--;
          if (this.pending.length > 0) this.flush();
          this.wakeIdleWaiters();
        });
    }
  }

  private async runBatch(batch: Delivery[]): Promise<void> {
    // Deliveries of a closed channel will be redelivered; processing them now is wasted work.
    const live = batch.filter((d) => d.session.open);
    if (live.length === 0) return;
    const outcomes = await this.pipeline.process(live.map((d) => d.incoming));
    await this.settle(live, outcomes);
  }

  private toIncoming(message: ConsumeMessage): IncomingMessage {
    const { properties, fields } = message;
    const headers = (properties.headers ?? {}) as Record<string, unknown>;
    const count = headers["x-delivery-count"];
    return {
      body: message.content,
      contentType: typeof properties.contentType === "string" ? properties.contentType : undefined,
      contentEncoding: typeof properties.contentEncoding === "string" ? properties.contentEncoding : undefined,
      delivery: {
        queue: this.options.queue,
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
    const acks = new Map<Session, Delivery[]>();
    const requeues: Delivery[] = [];
    outcomes.forEach((o, i) => {
      const d = batch[i]!;
      if (o.kind === "requeue") requeues.push(d);
      else {
        const list = acks.get(d.session) ?? [];
        list.push(d);
        acks.set(d.session, list);
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
    for (const [session, deliveries] of acks) this.ack(session, deliveries);
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
    const { session, message } = delivery;
    if (!session.open) return false;
    const key: EventKey | null = outcome.key;
    try {
      await session.publisher.publish("", this.quarantineQueue, message.content, {
        persistent: true,
        ...(message.properties.contentType ? { contentType: message.properties.contentType as string } : {}),
        ...(message.properties.messageId ? { messageId: message.properties.messageId as string } : {}),
        // The copy keeps what an operator needs to read and replay the original.
        ...(message.properties.contentEncoding ? { contentEncoding: message.properties.contentEncoding as string } : {}),
        ...(message.properties.type ? { type: message.properties.type as string } : {}),
        ...(message.properties.timestamp !== undefined ? { timestamp: message.properties.timestamp as number } : {}),
        headers: {
          ...message.properties.headers,
          "x-rabbit-inbox-reason": outcome.reason,
          "x-rabbit-inbox-detail": outcome.detail.slice(0, 1000),
          "x-rabbit-inbox-handler": this.pipeline.handlerName,
          "x-rabbit-inbox-original-queue": this.options.queue,
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
    const { session, message } = delivery;
    if (!session.open) return false;
    const headers = (message.properties.headers ?? {}) as Record<string, unknown>;
    const attempt = retryAttemptOf(headers) + 1;
    const target = retryQueueName(this.options.queue, attempt);
    try {
      await session.publisher.publish("", target, message.content, {
        persistent: true,
        ...(typeof message.properties.contentType === "string" ? { contentType: message.properties.contentType } : {}),
        ...(typeof message.properties.messageId === "string" ? { messageId: message.properties.messageId } : {}),
        ...(typeof message.properties.timestamp === "number" ? { timestamp: message.properties.timestamp } : {}),
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
  private ack(session: Session, deliveries: Delivery[]): void {
    const queued = this.acksDue.get(session);
    if (queued) queued.push(...deliveries);
    else this.acksDue.set(session, [...deliveries]);
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
    for (const [session, deliveries] of due) this.sendAcks(session, deliveries);
  }

  private sendAcks(session: Session, deliveries: Delivery[]): void {
    if (!session.open) {
      this.logger.debug("channel closed before ack; the broker will redeliver and the dedup record decides", { deliveries: deliveries.length });
      return;
    }
    const byTag = new Map(deliveries.map((d) => [d.message.fields.deliveryTag, d.message]));
    const plan = session.tracker.planAcks([...byTag.keys()]);
    try {
      if (plan.multipleUpTo !== null) session.channel.ack(byTag.get(plan.multipleUpTo)!, true);
      for (const tag of plan.singles) session.channel.ack(byTag.get(tag)!, false);
    } catch (error) {
      // IllegalOperationError: the channel closed under us. Nothing to do: redelivery is safe.
      this.logger.warn("ack failed; the broker will redeliver and the dedup record decides", { error: describeError(error) });
    }
  }

  private nack(delivery: Delivery): void {
    const { session, message } = delivery;
    if (!session.open) return;
    session.tracker.settled(message.fields.deliveryTag);
    try {
      session.channel.nack(message, false, true);
    } catch (error) {
      this.logger.warn("nack failed; the broker will redeliver when the channel closes", { error: describeError(error) });
    }
  }

  private sessionLost(session: Session, what: string, error?: Error): void {
    if (!session.open) return;
    session.open = false;
    // Deliveries of this channel that have not started are dropped: the broker requeues them.
    this.pending = this.pending.filter((d) => d.session !== session);
    this.wakeIdleWaiters();
    if (this.state !== "running") return;
    this.logger.warn("AMQP session lost; reconnecting", { what, error: error ? redactSecrets(error.message) : undefined, session: session.id });
    void session.connection.close().catch(() => undefined);
    this.reconnecting ??= this.reconnect().finally(() => { this.reconnecting = undefined; });
  }

  private async reconnect(): Promise<void> {
    const base = this.options.reconnectBaseDelayMs ?? 200;
    const max = this.options.reconnectMaxDelayMs ?? 10_000;
    for (let attempt = 1; this.state === "running"; attempt++) {
      const delay = Math.min(max, base * 2 ** (attempt - 1));
      await sleep(Math.round(delay / 2 + (Math.random() * delay) / 2));
      if (this.state !== "running") return;
      try {
        await this.openSession();
        this.logger.info("AMQP session restored", { queue: this.options.queue, attempt });
        return;
      } catch (error) {
        this.logger.warn("reconnect failed", { attempt, error: redactSecrets(describeError(error)) });
      }
    }
  }
}

/** Header counting broker-side (delayed) retries of a message. */
export const RETRY_ATTEMPT_HEADER = "x-rabbit-inbox-retry";

function retryAttemptOf(headers: Readonly<Record<string, unknown>>): number {
  const value = headers[RETRY_ATTEMPT_HEADER];
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v: unknown) => (Buffer.isBuffer(v) ? `<${v.length} bytes>` : typeof v === "bigint" ? v.toString() : v));
  } catch {
    return "{}";
  }
}
