import type { ConsumeMessage } from "amqplib";
import { InboxConfigError, describeError } from "../core/errors.js";
import type { Instrumentation } from "../core/instrumentation.js";
import type { ThrottledLogger } from "../core/log-throttle.js";
import { type Logger, redactSecrets } from "../core/logger.js";
import type { Outcome } from "../core/outcome.js";
import type { InboxPipeline } from "../core/pipeline.js";
import type { ConsumerMetrics } from "../observability/inbox-metrics.js";
import type { BackpressureGate } from "./backpressure-gate.js";
import type { BatchScheduler } from "./batch-scheduler.js";
import type { BrokerSession } from "./broker-session.js";
import type { ConsumerHealth } from "./consumer-health.js";
import { consumerParts } from "./consumer-parts.js";
import { partitionOf } from "./consumer-topology.js";
import type { DeliverySettler, OutcomeCounts } from "./delivery-settler.js";
import { incomingMessageOf } from "./incoming-message.js";
import type { ConsumerSettings, InboxConsumerOptions } from "./inbox-consumer-options.js";
import { assignPartitions } from "./partition-assignment.js";
import type { PartitionMembership } from "./partition-membership.js";
import { type Delivery, QueueConsumer } from "./queue-consumer.js";
import type { ReconnectingSession } from "./reconnecting-session.js";
import { partitionQueueName } from "./topology.js";

export type { InboxConsumerOptions, PartitionOptions } from "./inbox-consumer-options.js";
export type { OutcomeCounts } from "./delivery-settler.js";

/**
 * Consumes a queue (or the partitions of a partitioned queue) through the inbox pipeline: manual
 * acks, batches committed before any ack, quarantine published with confirms before the original
 * is acked, and reconnection with backoff (to the next broker node) after a connection or
 * channel loss. Deliveries of a lost channel are never acked on another one: the broker
 * redelivers them and the dedup record decides. When the pipeline cannot process a batch at all
 * (it rejects, e.g. with an InboxConfigError), the consumer stops: see whenStopped().
 */
export class InboxConsumer<E, Tx> {
  private readonly options: InboxConsumerOptions<E, Tx>;
  private readonly settings: ConsumerSettings;
  private readonly pipeline: InboxPipeline<E, Tx>;
  private readonly logger: Logger;
  private readonly broker: ReconnectingSession;
  private readonly membership: PartitionMembership | undefined;
  private readonly batches: BatchScheduler;
  private readonly gate: BackpressureGate | undefined;
  private readonly settler: DeliverySettler;
  private readonly metrics: ConsumerMetrics;
  private readonly instrumentation: Instrumentation;
  private readonly callbackLog: ThrottledLogger;
  /** By queue name, on the current session: the work queue, or the partitions this replica holds. */
  private consumers = new Map<string, QueueConsumer>();
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  private stopping: Promise<void> | undefined;
  /** What stopped the consumer on its own, if something did. */
  private fatalError: unknown;
  private readonly stopped: Promise<void>;
  private settleStopped!: (error?: unknown) => void;
  /** Partition hand-overs run one at a time, in the order membership changes were seen. */
  private rebalancing: Promise<void> = Promise.resolve();

  constructor(options: InboxConsumerOptions<E, Tx>) {
    this.options = options;
    const parts = consumerParts(options, {
      runBatch: (batch) => this.runBatch(batch),
      gateOpened: () => this.batches.flush(),
      startConsuming: (session) => this.startConsuming(session),
      sessionLost: (session, what, error, reconnecting) => this.sessionLost(session, what, error, reconnecting),
      scheduleRebalance: () => this.scheduleRebalance(),
      running: () => this.state === "running",
      giveBack: (consumer) => this.giveBack(consumer),
      node: () => this.broker.session?.node,
      heldPartitions: () => this.heldPartitions.length,
    });
    ({
      settings: this.settings, logger: this.logger, callbackLog: this.callbackLog, instrumentation: this.instrumentation, gate: this.gate,
      metrics: this.metrics, pipeline: this.pipeline, membership: this.membership, broker: this.broker, batches: this.batches, settler: this.settler,
    } = parts);
    this.stopped = new Promise<void>((resolve, reject) => {
      // Whatever stops it (stop(), a failed start, a fatal error), its gauges leave the registry.
      this.settleStopped = (error) => { this.metrics.close(); if (error === undefined) resolve(); else reject(error instanceof Error ? error : new Error(describeError(error))); };
    });
    // Observed here, so that a consumer whose caller never asks does not crash the process
    // with an unhandled rejection: the error is logged at error level either way.
    this.stopped.catch(() => undefined);
  }

  /** Outcome counts since start. */
  get outcomeCounts(): Readonly<OutcomeCounts> { return this.settler.counts; }

  /** The partitions this replica consumes now (partitioned mode), sorted; [] otherwise. */
  get heldPartitions(): number[] {
    if (!this.options.partitions || !this.broker.session) return [];
    return [...this.consumers.keys()].map(partitionOf).sort((a, b) => a - b);
  }

  /** Connection, consumption and last commit, for a readiness probe or a status page. */
  health(): ConsumerHealth {
    const session = this.broker.session;
    const subscribed = this.options.partitions ? this.membership?.attached === true : [...this.consumers.values()].some((c) => c.open && c.session === session);
    return {
      state: this.state, connected: session !== undefined, node: session?.node ?? null, consuming: this.state === "running" && session !== undefined && subscribed,
      lastCommitAt: this.settler.lastCommitAt, outcomes: { ...this.settler.counts }, ...(this.gate ? { backpressure: this.gate.state() } : {}), ...(this.options.store.databaseHealth ? { database: this.options.store.databaseHealth() } : {}),
      ...(this.options.partitions ? { partitionsHeld: this.heldPartitions } : {}),
    };
  }

  /**
   * Resolves once the consumer has stopped: after stop(), or after it stopped on its own. Rejects
   * with the error that stopped it on its own: start() failed, or the pipeline rejected a batch
   * (an InboxConfigError from the handler or the store, a bug). The deliveries of that batch are
   * neither acked, nacked nor quarantined: closing the channel gives them back to the queue.
   */
  whenStopped(): Promise<void> {
    return this.stopped;
  }

  /** Connects, declares or checks the topology, and starts consuming. Rejects on a bad topology. */
  async start(): Promise<void> {
    if (this.state !== "idle") throw new InboxConfigError(`start() called on a consumer that is ${this.state}`);
    this.state = "running";
    try {
      await this.broker.open();
      await this.rebalancing;
    } catch (error) {
      this.state = "stopped";
      this.settleStopped(error);
      throw error;
    }
    // stop() began while the session opened: that session was closed, and nothing consumes.
    if (this.state !== "running") return;
    this.logger.info("consuming", {
      queue: this.options.queue, handler: this.pipeline.handlerName, store: this.options.store.dialect, node: this.broker.session?.node,
      prefetch: this.settings.prefetch, batchSize: this.settings.batchSize, concurrency: this.settings.concurrency,
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
  stop(): Promise<void> {
    if (this.state === "stopped" || this.state === "idle") {
      if (this.state === "idle") this.settleStopped();
      this.state = "stopped";
      return this.stopping ?? Promise.resolve();
    }
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  private async shutdown(): Promise<void> {
    this.state = "stopping";
    this.broker.stopReconnecting();
    const open = this.broker.session !== undefined;
    if (this.membership) {
      // Tell the others first: they subscribe and wait while this replica hands over.
      await this.membership.leave();
      await this.rebalancing;
      if (open) await Promise.all([...this.consumers.values()].map((c) => this.release(c)));
    } else if (open) {
      for (const consumer of this.consumers.values()) await consumer.cancel(this.logger);
    }
    this.gate?.release();
    this.batches.flush();
    await this.batches.whenIdle();
    this.settler.flushAcks();
    this.state = "stopped";
    // Closed even when the session was lost meanwhile (the broker closed a channel during the
    // stop): its connection may still be open, and would keep the process alive. The channels
    // close before the connection: amqplib writes each channel's frames through its own buffer
    // and multiplexes them, so a connection-level Close can overtake acks still buffered on the
    // consuming channel, and the broker then requeues deliveries whose effects committed (seen
    // here: up to a prefetch's worth). A channel's Close queues behind its acks.
    for (const consumer of this.consumers.values()) await consumer.close();
    await this.broker.close();
    this.callbackLog.flush();
    this.logger.info("stopped", { queue: this.options.queue, ...this.settler.counts });
    this.settleStopped(this.fatalError);
  }

  /** A batch holds only deliveries of open channels: a lost channel's pending ones are dropped at once (sessionLost). */
  private async runBatch(batch: Delivery[]): Promise<void> {
    let outcomes: Outcome[];
    const messages = batch.map((d) => d.incoming);
    const handler = this.pipeline.handlerName;
    this.instrumentation.startDeliveries(batch, (d) => ({ queue: d.consumer.queue, routingKey: d.message.fields.routingKey, deliveryTag: d.message.fields.deliveryTag, handler }), this.settings.processSpans);
    try {
      outcomes = await this.pipeline.process(messages);
    } catch (error) {
      this.instrumentation.deliveriesFailed(messages, error);
      this.stopOnError(error, batch);
      return;
    }
    // The spans end with each delivery's settled outcome, even when a callback throws meanwhile.
    let settled = outcomes;
    try { settled = await this.settler.settle(batch, outcomes); } finally { this.instrumentation.deliveriesSettled(messages, settled); }
  }

  /**
   * The pipeline decides every delivery's outcome itself; a rejection means it cannot work as
   * configured (or a bug), and every later batch would fail the same way. Settling nothing of
   * the batch leaves its deliveries unacked: the channels' close gives them back to the queue.
   */
  private stopOnError(error: unknown, batch: Delivery[]): void {
    this.logger.error("the pipeline rejected a batch; the consumer stops and gives its deliveries back unsettled", {
      handler: this.pipeline.handlerName, queue: this.options.queue, messages: batch.length,
      code: (error as { code?: unknown } | null)?.code, error: describeError(error),
    });
    if (this.fatalError !== undefined) return;
    this.fatalError = error ?? new Error("the pipeline rejected a batch");
    this.batches.halt();
    void this.stop();
  }

  /** Consumes the work queue on a session that now counts, or joins the replicas that split the partitions. */
  private async startConsuming(session: BrokerSession): Promise<void> {
    this.consumers = new Map();
    this.metrics.connected(session.node);
    if (this.membership) {
      await this.membership.attach(session.connection);
      this.scheduleRebalance();
    } else {
      await this.consume(session, this.options.queue);
    }
  }

  private sessionLost(session: BrokerSession, what: string, error: Error | undefined, reconnecting: boolean): void {
    // A hand-over waiting on these channels has nothing left to wait for: the broker requeues.
    for (const consumer of this.consumers.values()) if (consumer.session === session) consumer.lost();
    this.membership?.detach();
    // Deliveries of this connection that have not started are dropped: the broker requeues them.
    this.batches.drop((d) => d.consumer.session === session);
    if (!reconnecting) return;
    this.logger.warn("AMQP session lost; reconnecting", { what, node: session.node, error: error ? redactSecrets(error.message) : undefined, session: session.id });
  }

  private async consume(session: BrokerSession, queue: string): Promise<void> {
    const consumer = await QueueConsumer.start(session, queue, {
      prefetch: this.settings.prefetch, logger: this.logger, onDelivery: (c, message) => this.received(c, message),
    });
    this.consumers.set(queue, consumer);
  }

  private received(consumer: QueueConsumer, message: ConsumeMessage): void {
    // Decoded and fingerprinted now, while the batch before it waits on the database, rather
    // than when its own batch starts.
    const incoming = incomingMessageOf(message, consumer.queue);
    this.pipeline.prepareAhead(incoming);
    this.batches.add({ message, consumer, receivedAt: performance.now(), incoming });
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
    this.batches.drop((d) => d.consumer === consumer);
    await consumer.whenIdle();
    this.settler.flushAcks();
    await consumer.close();
    if (this.consumers.get(consumer.queue) === consumer) this.consumers.delete(consumer.queue);
  }

  /**
   * Gives a channel's unsettled deliveries back in the order they were delivered, by closing the
   * channel: the broker puts what a closed channel held back at the head of the queue, in order.
   * A nack would not keep the order: a quorum queue puts a nacked message at the back, behind
   * whatever reached the queue meanwhile. The acks due go out first, the channel's deliveries
   * that wait for a batch go back with it, and while running the queue is consumed again on a
   * new channel. A channel being handed over or already lost gets its close anyway. Never
   * rejects: a consume that fails loses the session, and the reconnect consumes again.
   */
  private async giveBack(consumer: QueueConsumer): Promise<void> {
    this.batches.drop((d) => d.consumer === consumer);
    if (!consumer.open || consumer.releasing) return;
    this.settler.flushAcks();
    await consumer.close();
    const { session, queue } = consumer;
    if (this.state !== "running" || !session.isOpen || this.consumers.get(queue) !== consumer) return;
    try {
      await this.consume(session, queue);
    } catch (error) {
      this.logger.warn("could not consume again after giving deliveries back; reconnecting", { queue, error: describeError(error) });
      session.lost("consume after a give-back failed", error instanceof Error ? error : undefined);
    }
  }

  private scheduleRebalance(): void {
    this.rebalancing = this.rebalancing.then(async () => {
      const session = this.broker.session;
      try {
        await this.rebalance(session);
      } catch (error) {
        // The session is lost (a reconnect follows and rebalances), or a subscribe failed: close
        // the connection it ran on so that the reconnect starts from a clean state. Only that
        // one: a session a reconnect opened meanwhile is sound, and rebalances by itself.
        this.logger.warn("partition hand-over failed; reconnecting", { error: describeError(error) });
        session?.lost("partition hand-over failed", error instanceof Error ? error : undefined);
      }
    });
  }

  /** Releases the partitions this replica no longer owns, then subscribes to those it gained, on `session`. */
  private async rebalance(session: BrokerSession | undefined): Promise<void> {
    const membership = this.membership!;
    if (this.state !== "running" || !session) return;
    const members = membership.members();
    const owned = new Set(assignPartitions(members, this.options.partitions!.count, membership.memberId).map((p) => partitionQueueName(this.options.queue, p)));
    const released: number[] = [];
    const acquired: number[] = [];
    for (const consumer of [...this.consumers.values()]) {
      if (owned.has(consumer.queue)) continue;
      await this.release(consumer);
      released.push(partitionOf(consumer.queue));
    }
    for (const queue of owned) {
      if (this.state !== "running" || !session.isOpen) return;
      if (this.consumers.has(queue)) continue;
      await this.consume(session, queue);
      acquired.push(partitionOf(queue));
    }
    if (released.length > 0 || acquired.length > 0) {
      this.logger.info("partitions rebalanced", {
        queue: this.options.queue, member: membership.memberId, members: members.length,
        held: this.heldPartitions, released, acquired, node: session.node,
      });
    }
  }
}
