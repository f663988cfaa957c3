import { containCallback } from "../core/contained-callback.js";
import { describeError } from "../core/errors.js";
import type { EventKey } from "../core/event.js";
import type { ThrottledLogger } from "../core/log-throttle.js";
import type { PipelineHook } from "../core/pipeline.js";
import type { Logger } from "../core/logger.js";
import type { Outcome, OutcomeKind } from "../core/outcome.js";
import { backoffDelay, sleep } from "../core/retry-policy.js";
import type { ConsumerMetrics } from "../observability/inbox-metrics.js";
import type { DeliveryRepublisher } from "./delivery-republisher.js";
import type { Delivery, QueueConsumer } from "./queue-consumer.js";

export type OutcomeCounts = Record<OutcomeKind, number>;

export interface DeliverySettlerOptions {
  queue: string;
  republisher: DeliveryRepublisher;
  logger: Logger;
  /** First pause before giving deliveries back (doubling while the database stays unreachable). */
  requeueDelayMs: number;
  /** False while stopping: deliveries are then given back at once. */
  isRunning: () => boolean;
  /**
   * Gives back every delivery of this channel the consumer has not settled, in delivery order
   * (see InboxConsumer.giveBack). Never rejects.
   */
  giveBack: (consumer: QueueConsumer) => Promise<void>;
  hook: PipelineHook | undefined;
  onOutcome: ((outcome: Outcome, timing: { latencyMs: number }) => void) | undefined;
  metrics: ConsumerMetrics;
  /** Where what the application's callbacks (onOutcome, the after-ack hook) throw is reported. */
  callbackLog: ThrottledLogger;
}

/** Pauses before a requeue never grow past this (unless requeueDelayMs itself is longer). */
const MAX_REQUEUE_DELAY_MS = 30_000;

/**
 * Settles a batch on the broker as the pipeline decided: copies to quarantine or to a delay
 * queue first (confirmed), then acks, or nacks with requeue. Acks of the transactions that
 * committed in one turn of the event loop share multiple-ack frames.
 */
export class DeliverySettler {
  readonly counts: OutcomeCounts = { applied: 0, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 };
  /** When a settled batch last held a delivery whose transaction committed. */
  lastCommitAt: Date | null = null;
  /** Batches in a row that gave deliveries back: the pause before the next nack grows with it. */
  private requeueStreak = 0;
  /** Acks waiting for the end of this event-loop turn, per channel (see ack). */
  private readonly acksDue = new Map<QueueConsumer, Delivery[]>();
  private ackFlushScheduled = false;

  /** The application's callbacks, contained: a throw there must not lose the acks of a batch that committed. */
  private readonly onOutcome: ((outcome: Outcome, timing: { latencyMs: number }) => void | Promise<void>) | undefined;
  private readonly afterAck: ((keys: ReadonlyArray<EventKey | null>) => void | Promise<void>) | undefined;

  constructor(private readonly options: DeliverySettlerOptions) {
    const { onOutcome, hook, callbackLog } = options;
    this.onOutcome = onOutcome && containCallback("onOutcome", onOutcome, callbackLog);
    this.afterAck = hook && containCallback("the after-ack hook", (keys: ReadonlyArray<EventKey | null>) => hook("after-ack", keys), callbackLog);
  }

  /** Settles a batch; returns each delivery's outcome as settled (a copy the broker refused makes it `requeue`). */
  async settle(batch: Delivery[], decided: Outcome[]): Promise<Outcome[]> {
    const { republisher, hook } = this.options;
    const { onOutcome, afterAck } = this;
    // Quarantined and delayed messages must be safely in their queue before their originals go;
    // one whose publish was not confirmed is not acked but given back to the broker.
    let outcomes = decided;
    let publishRefused = false;
    if (decided.some((o) => o.kind === "quarantined" || o.kind === "delayed")) {
      const published = await Promise.all(
        decided.map((o, i) =>
          o.kind === "quarantined" ? republisher.quarantine(batch[i]!, o)
          : o.kind === "delayed" ? republisher.delayRetry(batch[i]!, o)
          : Promise.resolve(true)),
      );
      publishRefused = published.includes(false);
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
    // Queued before anything is given back: a give-back sends the acks due before it closes a channel.
    for (const [consumer, deliveries] of acks) this.ack(consumer, deliveries);
    if (requeues.length > 0) {
      // Give the database (or broker) a moment before the broker hands them out again; a
      // stopping consumer gives them back at once.
      this.requeueStreak++;
      const base = this.options.requeueDelayMs;
      const pause = backoffDelay({ baseDelayMs: base, maxDelayMs: Math.max(base, MAX_REQUEUE_DELAY_MS), jitter: false }, this.requeueStreak);
      if (this.options.isRunning() && publishRefused) {
        // A copy the broker did not confirm (a blocked connection, a full queue): closing the
        // channel would wait for the broker to read our close, which a blocked connection never
        // does. Those deliveries carry no business effect to keep in order; give them back at
        // once and let the rest go on.
        await sleep(pause);
        for (const d of requeues) this.nack(d);
      } else {
        if (this.options.isRunning()) await sleep(pause);
        await this.giveBackInOrder(requeues);
      }
    } else {
      this.requeueStreak = 0;
    }
    // A failure-window hook sees its acks on the wire already ("after-ack" means sent).
    if (hook) this.flushAcks();
    const now = performance.now();
    outcomes.forEach((o, i) => {
      this.counts[o.kind]++;
      void onOutcome?.(o, { latencyMs: now - batch[i]!.receivedAt });
    });
    this.options.metrics.settled(batch, outcomes, now);
    if (outcomes.some((o) => o.kind === "applied" || o.kind === "duplicate" || o.kind === "quarantined")) this.lastCommitAt = new Date();
    this.logSettled(batch, outcomes);
    if (afterAck) {
      const acked = outcomes.flatMap((o) => (o.kind !== "requeue" ? [o.key] : []));
      if (acked.length > 0) await afterAck(acked);
    }
    return outcomes;
  }

  /** Sends every queued ack now. */
  flushAcks(): void {
    this.ackFlushScheduled = false;
    const due = [...this.acksDue];
    this.acksDue.clear();
    for (const [consumer, deliveries] of due) this.sendAcks(consumer, deliveries);
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

  /** Acks on the channel that delivered them, and only there (another channel's tag 7 is another message). */
  private sendAcks(consumer: QueueConsumer, deliveries: Delivery[]): void {
    if (!consumer.open) {
      this.options.logger.debug("channel closed before ack; the broker will redeliver and the dedup record decides", { queue: consumer.queue, deliveries: deliveries.length });
      return;
    }
    const byTag = new Map(deliveries.map((d) => [d.message.fields.deliveryTag, d.message]));
    const plan = consumer.tracker.planAcks([...byTag.keys()]);
    try {
      if (plan.multipleUpTo !== null) consumer.channel.ack(byTag.get(plan.multipleUpTo)!, true);
      for (const tag of plan.singles) consumer.channel.ack(byTag.get(tag)!, false);
    } catch (error) {
      // IllegalOperationError: the channel closed under us. Nothing to do: redelivery is safe.
      this.options.logger.warn("ack failed; the broker will redeliver and the dedup record decides", { error: describeError(error) });
    }
  }

  /**
   * Gives deliveries back so that nothing delivered after them on their channel is applied
   * before they come back, with everything behind them (see InboxConsumer.giveBack). A
   * database that refuses work for an hour thus costs an hour of waiting, never the order.
   */
  private async giveBackInOrder(requeues: Delivery[]): Promise<void> {
    for (const consumer of new Set(requeues.map((d) => d.consumer))) await this.options.giveBack(consumer);
  }

  private nack(delivery: Pick<Delivery, "consumer" | "message">): void {
    const { consumer, message } = delivery;
    if (!consumer.open) return;
    consumer.tracker.settled(message.fields.deliveryTag);
    try {
      consumer.channel.nack(message, false, true);
    } catch (error) {
      this.options.logger.warn("nack failed; the broker will redeliver when the channel closes", { error: describeError(error) });
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
    this.options.logger.debug("batch settled", { queue, messages: outcomes.length, ...tally, redelivered: redelivered.length });
    if (redelivered.length > 0) {
      this.options.logger.info("redelivered deliveries settled", { queue, redelivered: redelivered.length, events: redelivered.slice(0, 50) });
    }
  }
}
