import type { Channel, ConsumeMessage } from "amqplib";
import { describeError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import type { IncomingMessage } from "../core/pipeline.js";
import type { BrokerSession } from "./broker-session.js";
import { DeliveryTracker } from "./delivery-tracker.js";

/** A delivery and the one channel allowed to settle it. */
export interface Delivery {
  message: ConsumeMessage;
  consumer: QueueConsumer;
  /** performance.now() when the delivery reached this process. */
  receivedAt: number;
  /** The pipeline's view of it, decoded and fingerprinted on arrival. */
  incoming: IncomingMessage;
}

export interface QueueConsumerOptions {
  prefetch: number;
  logger: Logger;
  /** A delivery to process; not called for one received while the queue is being handed over. */
  onDelivery: (consumer: QueueConsumer, message: ConsumeMessage) => void;
}

/**
 * One queue consumed on a channel of its own. Its delivery tags belong to that channel alone:
 * they are settled there, or not at all. The channel closing under it, or the broker
 * cancelling it, loses the whole session (its deliveries come back on a new one).
 */
export class QueueConsumer {
  readonly tracker = new DeliveryTracker();
  private consumerTag: string | undefined;
  private isOpen = true;
  /** Being handed over: new deliveries are left unacked for the next owner. */
  releasing = false;
  /** Deliveries of this channel in batches that have started. */
  private inFlight = 0;
  /** Resolved when inFlight reaches 0 or the channel closes. */
  private idleWaiters: Array<() => void> = [];

  private constructor(readonly queue: string, readonly session: BrokerSession, readonly channel: Channel) {}

  /** Opens a channel of its own on the session for `queue` and consumes it with manual acks. */
  static async start(session: BrokerSession, queue: string, options: QueueConsumerOptions): Promise<QueueConsumer> {
    const channel = await session.connection.createChannel();
    const consumer = new QueueConsumer(queue, session, channel);
    channel.on("error", (error: Error) => options.logger.warn("AMQP channel error", { queue, node: session.node, error: error.message }));
    channel.on("close", (error?: Error) => {
      // A channel this consumer closed itself (a hand-over, a give-back, a stop) is not a loss.
      if (!consumer.isOpen) return;
      session.lost(`consume channel of ${queue} closed`, error);
    });
    await channel.prefetch(options.prefetch);
    const onMessage = (message: ConsumeMessage | null): void => {
      if (message === null) {
        // The broker cancelled the consumer (queue deleted, failover): amqplib passes null.
        options.logger.warn("broker cancelled the consumer; reconnecting", { queue });
        session.lost("consumer cancelled by broker");
        return;
      }
      consumer.tracker.delivered(message.fields.deliveryTag);
      // Handed over: left unacked, the broker requeues it for the next owner when the channel closes.
      if (!consumer.releasing && consumer.open) options.onDelivery(consumer, message);
    };
    const { consumerTag } = await channel.consume(queue, onMessage, { noAck: false });
    consumer.consumerTag = consumerTag;
    return consumer;
  }

  /** False once the channel is closed, by this process or with its session. */
  get open(): boolean {
    return this.isOpen && this.session.isOpen;
  }

  batchStarted(): void {
    this.inFlight++;
  }

  batchDone(): void {
    this.inFlight--;
    if (this.inFlight === 0) this.wakeIdleWaiters();
  }

  /** Resolves once no started batch holds a delivery of this channel, or the channel is gone. */
  whenIdle(): Promise<void> {
    if (this.inFlight === 0 || !this.open) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** The session is lost: nothing waits on this channel any more (the broker requeues its deliveries). */
  lost(): void {
    this.isOpen = false;
    this.wakeIdleWaiters();
  }

  /** Stops the broker's deliveries to this consumer; a refusal is logged, not thrown. */
  async cancel(logger: Logger): Promise<void> {
    if (!this.consumerTag || !this.open) return;
    await this.channel.cancel(this.consumerTag).catch((error: unknown) => {
      logger.warn("cancel failed while stopping", { error: describeError(error) });
    });
  }

  /** Closes the channel: the broker requeues what it did not see settled. */
  async close(): Promise<void> {
    if (!this.isOpen) return;
    this.isOpen = false;
    this.wakeIdleWaiters();
    await this.channel.close().catch(() => undefined);
  }

  private wakeIdleWaiters(): void {
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}
