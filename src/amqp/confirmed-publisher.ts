import type { ConfirmChannel, Options } from "amqplib";
import { QuarantinePublishError, describeError } from "../core/errors.js";

/** A publish waiting for its confirm, as a return of it would show it. */
interface Pending {
  exchange: string;
  routingKey: string;
  content: Buffer;
  messageId: unknown;
  /** When its confirm is overdue (performance.now()). */
  deadline: number;
  /** Ends the publish: rejects with `error`, else resolves (or rejects if it was returned). */
  finish(error?: Error): void;
}

/**
 * What amqplib fails a publish's confirm callback with when the broker nacked it (a channel
 * that closes fails its unconfirmed publishes with "channel closed" instead).
 */
const NACKED = "message nacked";

/** What a publisher reports to the owner of its channel. */
/** What a publish whose confirm did not come in time fails with; owners that give up on its channel name it too. */
export function confirmTimeoutMessage(timeoutMs: number): string {
  return `no publisher confirm within ${timeoutMs} ms`;
}

export interface ConfirmedPublisherEvents {
  /** The broker refused a publish (basic.nack): it did not take the message. */
  nacked?(): void;
  /** The broker confirmed a publish (basic.ack), routed or returned. */
  confirmed?(): void;
}

/** What amqplib hands a channel's `return` listener. */
interface ReturnedMessage {
  content?: Buffer;
  fields?: { exchange?: string; routingKey?: string };
  properties?: { messageId?: unknown };
}

/**
 * Publishes with publisher confirms and `mandatory`, and resolves only when the broker confirmed
 * the message AND routed it to a queue. A confirm that does not come within `timeoutMs` is a
 * failure (amqplib can wait for a heartbeat to notice a dead broker). Any failure rejects, and
 * the caller must not ack the message it was quarantining.
 *
 * The message goes out exactly as the caller built it: nothing of this publisher travels with it
 * to downstream consumers. A return is matched to its publish by what the broker sends back
 * (exchange, routing key, message id and body): the broker sends a message's return before its
 * confirm, and a channel's returns in publish order, so the oldest unconfirmed publish that
 * looks the same is the one returned. Two publishes that look the same route the same way.
 */
export class ConfirmedPublisher {
  /** Publishes waiting for their confirm, oldest first. */
  private readonly unconfirmed = new Set<Pending>();
  /** Those of them the broker returned: their confirm, when it comes, is a failure. */
  private readonly returned = new Set<Pending>();
  private idleWaiters: Array<() => void> = [];
  /**
   * One timer for every unconfirmed publish, due at the oldest one's deadline: publishes are
   * made in order with the same timeout, so the oldest is always the first overdue, and a
   * publish costs no timer of its own.
   */
  private overdueTimer: NodeJS.Timeout | undefined;

  constructor(private readonly channel: ConfirmChannel, private readonly timeoutMs: number, private readonly events: ConfirmedPublisherEvents = {}) {
    channel.on("return", (message: ReturnedMessage) => this.markReturned(message));
  }

  /**
   * Resolves once no publish waits for its confirm. Each one ends by its confirm, its timeout or
   * its channel's close, so this resolves within the timeout.
   */
  whenIdle(): Promise<void> {
    if (this.unconfirmed.size === 0) return Promise.resolve();
    return new Promise((resolve) => { this.idleWaiters.push(resolve); });
  }

  /**
   * `failed`, when given, turns the error a failed publish rejects with into the one the caller
   * wants (it gets how long the publish waited), in place of a `.catch` on the returned promise:
   * a relay publishes many messages at a time, and each `.catch` adds a promise per message.
   */
  publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish = {}, failed?: (error: Error, waitedMs: number) => Error): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let done = false;
      const started = performance.now();
      const publish: Pending = {
        exchange, routingKey, content, messageId: options.messageId, deadline: started + this.timeoutMs,
        finish: (error) => {
          if (done) return;
          done = true;
          this.unconfirmed.delete(publish);
          const wasReturned = this.returned.delete(publish);
          if (this.unconfirmed.size === 0) {
            clearTimeout(this.overdueTimer);
            this.overdueTimer = undefined;
            for (const resolve of this.idleWaiters.splice(0)) resolve();
          }
          if (error) reject(mapped(error, failed, started));
          else if (wasReturned) reject(mapped(new QuarantinePublishError(`message to ${JSON.stringify(routingKey)} on exchange ${JSON.stringify(exchange)} was unroutable (no queue bound)`), failed, started));
          else resolve();
        },
      };
      this.unconfirmed.add(publish);
      this.overdueTimer ??= setTimeout(() => this.finishOverdue(), this.timeoutMs);
      try {
        this.channel.publish(exchange, routingKey, content, options.mandatory === true ? options : { ...options, mandatory: true }, (err: unknown) => {
          if (done) return;
          if (!err) this.events.confirmed?.();
          else if (err instanceof Error && err.message === NACKED) this.events.nacked?.();
          publish.finish(err ? new QuarantinePublishError(`broker refused the publish: ${describeError(err)}`, { cause: err }) : undefined);
        });
      } catch (error) {
        publish.finish(new QuarantinePublishError(`publish failed: ${describeError(error)}`, { cause: error }));
      }
    });
  }

  /**
   * Fails every publish still waiting for its confirm with `error`, oldest first: for an owner
   * that gives up on the channel (its state unknown) and wants them to fail for that reason
   * rather than as lost with the channel it then closes.
   */
  abandon(error: Error): void {
    for (const p of this.unconfirmed) p.finish(error);
  }

  /** Fails every publish whose confirm is overdue, oldest first, and waits for the next one's deadline. */
  private finishOverdue(): void {
    this.overdueTimer = undefined;
    const now = performance.now();
    for (const p of this.unconfirmed) {
      if (p.deadline > now) break;
      p.finish(new QuarantinePublishError(confirmTimeoutMessage(this.timeoutMs)));
    }
    const oldest = this.unconfirmed.values().next();
    if (!oldest.done) this.overdueTimer = setTimeout(() => this.finishOverdue(), Math.max(1, oldest.value.deadline - now));
  }

  /** A return that matches no unconfirmed publish (not one of ours) changes nothing. */
  private markReturned(message: ReturnedMessage): void {
    const { fields, properties, content } = message;
    for (const p of this.unconfirmed) {
      if (this.returned.has(p) || p.exchange !== (fields?.exchange ?? "") || p.routingKey !== fields?.routingKey) continue;
      if (p.messageId !== properties?.messageId || !content || !p.content.equals(content)) continue;
      this.returned.add(p);
      return;
    }
  }
}

/** A failed publish's error, through the caller's `failed` when it gave one. */
function mapped(error: Error, failed: ((error: Error, waitedMs: number) => Error) | undefined, started: number): Error {
  return failed === undefined ? error : failed(error, performance.now() - started);
}
