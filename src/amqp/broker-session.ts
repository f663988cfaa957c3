import type { ChannelModel, ConfirmChannel } from "amqplib";
import { redactSecrets } from "../core/logger.js";
import type { BrokerConnector } from "./broker-connection.js";
import { ConfirmedPublisher } from "./confirmed-publisher.js";

/** What a session tells its keeper (see ReconnectingSession), once each for `lost`. */
export interface BrokerSessionListener {
  lost(session: BrokerSession, what: string, error: Error | undefined): void;
  error?(session: BrokerSession, source: "connection" | "publish channel", error: Error): void;
  blocked?(session: BrokerSession, reason: string): void;
  unblocked?(session: BrokerSession): void;
}

/**
 * One connection to one broker node, with the confirm channel its owner publishes on. It is
 * lost once, for good: at the first close of the connection or of that channel, or when its
 * owner says so (a channel of its own closed, a confirm that never came); a new session takes
 * its place. Deliveries received over it are settled over it or not at all.
 */
export class BrokerSession {
  private open = true;
  /** The first error the connection or the channel reported: why it was lost. */
  private firstError: string | undefined;

  private constructor(
    /** Numbers the sessions of one keeper, for logs. */
    readonly id: number,
    readonly connection: ChannelModel,
    /** `host:port` of the broker node. */
    readonly node: string,
    readonly publishChannel: ConfirmChannel,
    readonly publisher: ConfirmedPublisher,
    private readonly listener: BrokerSessionListener,
  ) {}

  /** Connects to the next node that answers and opens the confirm channel; leaves nothing open on failure. */
  static async open(id: number, connector: BrokerConnector, confirmTimeoutMs: number, listener: BrokerSessionListener): Promise<BrokerSession> {
    const { connection, node } = await connector.connect();
    try {
      const channel = await connection.createConfirmChannel();
      const session = new BrokerSession(id, connection, node, channel, new ConfirmedPublisher(channel, confirmTimeoutMs), listener);
      connection.on("error", (error: Error) => session.failed("connection", error));
      connection.on("close", (error?: Error) => session.lost("connection closed", error));
      connection.on("blocked", (reason: string) => listener.blocked?.(session, reason));
      connection.on("unblocked", () => listener.unblocked?.(session));
      channel.on("error", (error: Error) => session.failed("publish channel", error));
      channel.on("close", (error?: Error) => session.lost("publish channel closed", error));
      return session;
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** Why the session was lost, as the broker or the socket said it (no credentials). */
  get closeReason(): string | undefined {
    return this.firstError;
  }

  /** Marks the session lost (once) and tells its keeper. */
  lost(what: string, error?: Error): void {
    if (!this.open) return;
    this.open = false;
    this.listener.lost(this, what, error);
  }

  /**
   * Closes the confirm channel, then the connection; a loss this causes is not reported. The
   * owner closes its own channels first: a connection's Close can overtake frames still buffered
   * on a channel, while a channel's Close queues behind them.
   */
  async close(): Promise<void> {
    this.open = false;
    await this.publishChannel.close().catch(() => undefined);
    await this.connection.close().catch(() => undefined);
  }

  private failed(source: "connection" | "publish channel", error: Error): void {
    this.firstError ??= redactSecrets(error.message);
    this.listener.error?.(this, source, error);
  }
}
