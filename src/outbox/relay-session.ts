import type { ChannelModel, ConfirmChannel, Options } from "amqplib";
import type { BrokerConnector } from "../amqp/broker-connection.js";
import { ConfirmedPublisher } from "../amqp/confirmed-publisher.js";
import { describeError } from "../core/errors.js";
import { type Logger, redactSecrets } from "../core/logger.js";
import type { OutboxRow } from "./outbox-store.js";

/** AMQP property names a row may carry, copied into the publish options when present. */
const STRING_PROPERTIES = ["contentType", "contentEncoding", "type", "correlationId", "replyTo", "expiration", "appId"] as const;

export interface RelaySessionOptions {
  /** Shared by the relay's sessions, so a reconnect tries the other nodes first. */
  connector: BrokerConnector;
  publishTimeoutMs: number;
  logger: Logger;
  topology: ((channel: ConfirmChannel) => Promise<void>) | undefined;
}

/**
 * One broker connection of a relay, with its confirm channel. Closed for good at the first
 * connection or channel loss, or after a confirm timed out (the channel's state is then
 * unknown): the relay opens a new one with backoff.
 */
export class RelaySession {
  private open = true;
  private closeReason: string | undefined;

  private constructor(
    private readonly connection: ChannelModel,
    private readonly channel: ConfirmChannel,
    private readonly publisher: ConfirmedPublisher,
    private readonly options: RelaySessionOptions,
    /** The node this session is connected to, `host:port`. */
    readonly node: string,
  ) {}

  static async open(options: RelaySessionOptions): Promise<RelaySession> {
    const { connection, node } = await options.connector.connect();
    try {
      const channel = await connection.createConfirmChannel();
      const session = new RelaySession(connection, channel, new ConfirmedPublisher(channel, options.publishTimeoutMs), options, node);
      const lost = (what: string) => () => session.lost(what);
      connection.on("error", (error: Error) => { session.closeReason ??= redactSecrets(error.message); });
      connection.on("close", lost("connection closed"));
      connection.on("blocked", (reason: string) => options.logger.warn("broker blocked the relay's connection (resource alarm): publishes wait", { reason }));
      connection.on("unblocked", () => options.logger.info("broker unblocked the relay's connection"));
      channel.on("error", (error: Error) => { session.closeReason ??= error.message; });
      channel.on("close", lost("channel closed"));
      if (options.topology) await options.topology(channel);
      return session;
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  get isOpen(): boolean {
    return this.open;
  }

  /**
   * Publishes one row, persistent, with its message id, `mandatory` and a publisher confirm
   * within the timeout. Rejects when refused, returned (unroutable), unconfirmed in time, or
   * lost with the channel.
   */
  async publish(row: OutboxRow): Promise<void> {
    const started = performance.now();
    try {
      await this.publisher.publish(row.exchange, row.routingKey, row.body, publishOptions(row));
    } catch (error) {
      if (performance.now() - started >= this.options.publishTimeoutMs) this.lost("publisher confirm timed out");
      throw new Error(`${describeError(error)}${this.closeReason ? ` (${this.closeReason})` : ""}`, { cause: error });
    }
  }

  async close(): Promise<void> {
    this.open = false;
    await this.connection.close().catch(() => undefined);
  }

  private lost(what: string): void {
    if (!this.open) return;
    this.open = false;
    this.options.logger.warn("outbox relay lost its broker session; reconnecting", { what, node: this.node, reason: this.closeReason });
    void this.connection.close().catch(() => undefined);
  }
}

/** AMQP publish options of a row: its stored properties, persistent, with its message id. */
export function publishOptions(row: OutboxRow): Options.Publish {
  const p = row.properties;
  const options: Options.Publish = { persistent: true, messageId: row.messageId };
  for (const name of STRING_PROPERTIES) {
    const value = p[name];
    if (typeof value === "string") options[name] = value;
  }
  if (typeof p.priority === "number") options.priority = p.priority;
  if (typeof p.timestamp === "number") options.timestamp = p.timestamp;
  if (p.headers && typeof p.headers === "object" && !Array.isArray(p.headers)) options.headers = { ...(p.headers as Record<string, unknown>) };
  return options;
}
