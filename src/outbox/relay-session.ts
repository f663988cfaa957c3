import type { ConfirmChannel, Options } from "amqplib";
import type { BrokerConnector } from "../amqp/broker-connection.js";
import type { BrokerSession } from "../amqp/broker-session.js";
import { confirmTimeoutMessage } from "../amqp/confirmed-publisher.js";
import { ReconnectingSession } from "../amqp/reconnecting-session.js";
import { QuarantinePublishError, describeError } from "../core/errors.js";
import { type Logger, redactSecrets } from "../core/logger.js";
import type { Backoff } from "../core/retry-policy.js";
import type { OutboxRow } from "../core/store-contract/outbox-relay-store.js";

export interface RelaySessionOptions {
  connector: BrokerConnector;
  /** Names the relay in its log lines. */
  relayName: string;
  publishTimeoutMs: number;
  /** Between reconnect attempts after a loss, and between replacements of a nacked channel. */
  reconnect: Backoff;
  logger: Logger;
  /** Declares what the relay publishes to, on every new connection. */
  topology: ((channel: ConfirmChannel) => Promise<void>) | undefined;
  /** A new session replaced a lost one. */
  onRestored?: () => void;
}

/**
 * The relay's connection to the broker: its confirm channel, reconnected with backoff (to the
 * next node of the URL list) after a connection or channel loss, or after a confirm timed out
 * (the channel's state is then unknown); and a new confirm channel on the same connection
 * after a nack, since a channel can keep refusing every publish that a new channel would get
 * through (see BrokerSession). Rows wait in the outbox while there is no channel to publish on.
 */
export class RelaySession {
  private readonly broker: ReconnectingSession;
  private failure: { session: BrokerSession; map: (error: Error, waitedMs: number) => Error } | undefined;

  constructor(private readonly options: RelaySessionOptions) {
    const { logger, relayName: relay } = options;
    this.broker = new ReconnectingSession({
      connector: options.connector, confirmTimeoutMs: options.publishTimeoutMs, backoff: options.reconnect, replaceNackedChannel: options.reconnect,
      ...(options.topology ? { prepare: (session) => options.topology!(session.publishChannel) } : {}),
      events: {
        lost: (session, what, _error, reconnecting) => {
          if (reconnecting) logger.warn("outbox relay lost its broker session; reconnecting", { what, node: session.node, reason: session.closeReason });
        },
        restored: (session, attempt) => {
          options.onRestored?.();
          // A reconnect at the first attempt is routine; one after failures ends an outage.
          if (attempt > 1) logger.info("outbox relay reconnected to the broker", { relay, node: session.node, attempt });
        },
        reconnectFailed: (attempt, error) => logger.warn("outbox relay cannot reach the broker; rows wait in the outbox", {
          relay, attempt, error: redactSecrets(describeError(error)),
        }),
        publishChannelNacked: (session, delayMs, inARow) => logger.warn("the broker refused a publish; the relay publishes on a new channel", {
          relay, node: session.node, afterMs: delayMs, channelsRefusedInARow: inARow,
        }),
        blocked: (_session, reason) => logger.warn("broker blocked the relay's connection (resource alarm): publishes wait", { reason }),
        unblocked: () => logger.info("broker unblocked the relay's connection"),
      },
    });
  }

  /** Connects (rejects if no node answers: a relay fails fast at start) and declares the topology. */
  async open(): Promise<void> {
    await this.broker.open();
  }

  /** Whether rows can be published now: a session, and a confirm channel that is not being replaced. */
  get isOpen(): boolean {
    return this.broker.session?.acceptsPublishes === true;
  }

  /** Whether a session is open (its channel may be being replaced), for health checks. */
  get connected(): boolean {
    return this.broker.session !== undefined;
  }

  /**
   * Identifies the confirm channel in use: publishes made while it stays the same reach the
   * broker in the order they were made. It changes with the session and when a nacked channel
   * is replaced.
   */
  get channelIdentity(): object | undefined {
    return this.broker.session?.publisher;
  }

  /** The node of the session in use, `host:port`. */
  get node(): string | undefined {
    return this.broker.session?.node;
  }

  /**
   * Resolves once rows can be published again, or when `abort` resolves or the session closes
   * for good (check `isOpen` again: a new session can lose its channel meanwhile).
   */
  whenOpen(abort: Promise<void>): Promise<void> {
    const session = this.broker.session;
    if (!session) return this.broker.waitForSession(abort);
    return Promise.race([session.whenAcceptingPublishes(), abort]);
  }

  /**
   * Publishes one row, persistent, with its message id, `mandatory` and a publisher confirm
   * within the timeout. Rejects when refused, returned (unroutable), unconfirmed in time, or
   * lost with the channel.
   */
  publish(row: OutboxRow): Promise<void> {
    const session = this.broker.session;
    if (!session?.acceptsPublishes) return Promise.reject(new Error(session ? "the publish channel is being replaced" : "no broker session"));
    // Put on the channel before this returns: the relay's ordering relies on it.
    return session.publisher.publish(row.exchange, row.routingKey, row.body, publishOptions(row), this.failureOf(session));
  }

  /** One per session: what a failed publish of it rejects with, and a confirm that timed out ends it. */
  private failureOf(session: BrokerSession): (error: Error, waitedMs: number) => Error {
    if (this.failure?.session !== session) {
      this.failure = {
        session,
        map: (error, waitedMs) => {
          // After the publisher's current pass: the publishes overdue with this one fail as timed
          // out too, and those made after it fail naming the timeout that ends their channel,
          // rather than as lost with the channel this closes.
          if (waitedMs >= this.options.publishTimeoutMs) queueMicrotask(() => this.endTimedOut(session));
          return new Error(`${describeError(error)}${session.closeReason ? ` (${session.closeReason})` : ""}`, { cause: error });
        },
      };
    }
    return this.failure.map;
  }

  /**
   * Drops a session whose confirm timed out, failing what still waits on its channel first (a
   * second timeout of the same pass finds nothing left, and the session already lost).
   */
  private endTimedOut(session: BrokerSession): void {
    session.publisher.abandon(new QuarantinePublishError(`abandoned with its channel: an earlier publish got ${confirmTimeoutMessage(this.options.publishTimeoutMs)}`));
    session.lost("publisher confirm timed out");
  }

  /** No reconnect after this: a lost session stays lost until close(). */
  stopReconnecting(): void {
    this.broker.stopReconnecting();
  }

  async close(): Promise<void> {
    await this.broker.close();
  }
}

/**
 * AMQP publish options of a row: its stored properties, persistent and mandatory, with its
 * message id. Every field is present (undefined when the row has none, which amqplib treats as
 * absent), so every row's options share one shape instead of growing one property at a time.
 */
export function publishOptions(row: OutboxRow): Options.Publish {
  const p = row.properties;
  const headers = p.headers;
  return {
    persistent: true, mandatory: true, messageId: row.messageId,
    contentType: stringOrUndefined(p.contentType), contentEncoding: stringOrUndefined(p.contentEncoding),
    type: stringOrUndefined(p.type), correlationId: stringOrUndefined(p.correlationId), replyTo: stringOrUndefined(p.replyTo),
    expiration: stringOrUndefined(p.expiration), appId: stringOrUndefined(p.appId),
    priority: typeof p.priority === "number" ? p.priority : undefined,
    timestamp: typeof p.timestamp === "number" ? p.timestamp : undefined,
    // A copy: amqplib reads the headers as it encodes, and the row's properties may be shared.
    headers: headers && typeof headers === "object" && !Array.isArray(headers) ? { ...(headers as Record<string, unknown>) } : undefined,
  };
}

function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}
