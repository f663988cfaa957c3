import type { ChannelModel, ConfirmChannel } from "amqplib";
import { type Backoff, backoffDelay } from "../core/retry-policy.js";
import { redactSecrets } from "../core/logger.js";
import type { BrokerConnector } from "./broker-connection.js";
import { ConfirmedPublisher } from "./confirmed-publisher.js";

/** What a session tells its keeper (see ReconnectingSession), once each for `lost`. */
export interface BrokerSessionListener {
  lost(session: BrokerSession, what: string, error: Error | undefined): void;
  /** An error the connection or its confirm channel reported; their close follows. */
  error?(session: BrokerSession, source: "connection" | "publish channel", error: Error): void;
  /** The broker blocked the connection (a resource alarm): publishes wait. */
  blocked?(session: BrokerSession, reason: string): void;
  unblocked?(session: BrokerSession): void;
  /**
   * The broker nacked a publish on the confirm channel: the session stops publishing on it and
   * opens another in `delayMs`; `inARow`: channels retired so since the last confirm.
   */
  publishChannelNacked?(session: BrokerSession, delayMs: number, inARow: number): void;
}

export interface BrokerSessionOptions {
  /** Publisher-confirm timeout of the session's confirmed publishes, in ms. */
  confirmTimeoutMs: number;
  /**
   * Set: a nack retires the confirm channel it came on, and a new channel on the same
   * connection takes its place after this backoff (one step per channel retired since the last
   * confirm). Unset: a nack fails that publish and nothing else.
   */
  replaceNackedChannel?: Backoff | undefined;
}

/** The confirm channel a session publishes on, and its publisher. */
interface PublishChannel {
  channel: ConfirmChannel;
  publisher: ConfirmedPublisher;
}

/**
 * One connection to one broker node, with the confirm channel its owner publishes on. It is
 * lost once, for good: at the first close of the connection or of that channel, or when its
 * owner says so (a channel of its own closed, a confirm that never came); a new session takes
 * its place. Deliveries received over it are settled over it or not at all.
 *
 * A nack can be a channel's state rather than the message's: a channel's first publish to a
 * quorum queue whose leader's node just died, made before the cluster recorded the new
 * leader, is nacked, and so is every later publish on that channel until the old node
 * returns, while a new channel publishes fine. With `replaceNackedChannel`, the session then
 * stops publishing on that channel and opens another one on the same connection.
 */
export class BrokerSession {
  private open = true;
  /** The first error the connection or the channel reported: why it was lost. */
  private firstError: string | undefined;
  private current!: PublishChannel;
  /** Set while the confirm channel is retired and its successor not yet open. */
  private replacement: { timer: NodeJS.Timeout; done: () => void; ready: Promise<void> } | undefined;
  /** Confirm channels retired for a nack since the last confirm. */
  private nackedInARow = 0;

  private constructor(
    /** Numbers the sessions of one keeper, for logs. */
    readonly id: number,
    readonly connection: ChannelModel,
    /** `host:port` of the broker node. */
    readonly node: string,
    private readonly options: BrokerSessionOptions,
    private readonly listener: BrokerSessionListener,
  ) {}

  /** Connects to the next node that answers and opens the confirm channel; leaves nothing open on failure. */
  static async open(id: number, connector: BrokerConnector, options: BrokerSessionOptions, listener: BrokerSessionListener): Promise<BrokerSession> {
    const { connection, node } = await connector.connect();
    try {
      const channel = await connection.createConfirmChannel();
      const session = new BrokerSession(id, connection, node, options, listener);
      session.use(channel);
      connection.on("error", (error: Error) => session.failed("connection", error));
      connection.on("close", (error?: Error) => session.lost("connection closed", error));
      connection.on("blocked", (reason: string) => listener.blocked?.(session, reason));
      connection.on("unblocked", () => listener.unblocked?.(session));
      return session;
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** Open, with a confirm channel to publish on (none while a nacked one is being replaced). */
  get acceptsPublishes(): boolean {
    return this.open && this.replacement === undefined;
  }

  /** The confirm channel publishes go out on now. */
  get publishChannel(): ConfirmChannel {
    return this.current.channel;
  }

  /** The publisher of the current confirm channel: a new one when the channel was replaced. */
  get publisher(): ConfirmedPublisher {
    return this.current.publisher;
  }

  /** Resolves once the session accepts publishes again, or is lost or closed. */
  whenAcceptingPublishes(): Promise<void> {
    return this.replacement?.ready ?? Promise.resolve();
  }

  /** Why the session was lost, as the broker or the socket said it (no credentials). */
  get closeReason(): string | undefined {
    return this.firstError;
  }

  /** Marks the session lost (once) and tells its keeper. */
  lost(what: string, error?: Error): void {
    if (!this.open) return;
    this.open = false;
    this.endReplacement();
    this.listener.lost(this, what, error);
  }

  /**
   * Closes the confirm channel, then the connection; a loss this causes is not reported. The
   * owner closes its own channels first: a connection's Close can overtake frames still buffered
   * on a channel, while a channel's Close queues behind them.
   */
  async close(): Promise<void> {
    this.open = false;
    this.endReplacement();
    await this.current.channel.close().catch(() => undefined);
    await this.connection.close().catch(() => undefined);
  }

  /** Publishes go out on `channel` from now on; its close loses the session only while it is the one in use. */
  private use(channel: ConfirmChannel): void {
    const publisher = new ConfirmedPublisher(channel, this.options.confirmTimeoutMs, {
      nacked: () => this.nacked(publisher),
      // Only a channel in use that gets a confirm ends a run of nacked channels.
      confirmed: () => { if (publisher === this.current.publisher && !this.replacement) this.nackedInARow = 0; },
    });
    const inUse = () => this.current.channel === channel;
    channel.on("error", (error: Error) => { if (inUse()) this.failed("publish channel", error); });
    channel.on("close", (error?: Error) => { if (inUse()) this.lost("publish channel closed", error); });
    this.current = { channel, publisher };
  }

  /** A nack on the channel in use retires it; nacks of a channel already retired change nothing. */
  private nacked(publisher: ConfirmedPublisher): void {
    const backoff = this.options.replaceNackedChannel;
    if (!backoff || !this.open || this.replacement || publisher !== this.current.publisher) return;
    const delayMs = backoffDelay(backoff, ++this.nackedInARow);
    let done!: () => void;
    const ready = new Promise<void>((resolve) => { done = resolve; });
    this.replacement = { timer: setTimeout(() => void this.replaceChannel(), delayMs), done, ready };
    this.listener.publishChannelNacked?.(this, delayMs, this.nackedInARow);
  }

  /**
   * Opens the retired channel's successor on the same connection, then closes the retired one
   * once its publishes have their answers (a confirm that still comes is not lost). A channel
   * that cannot be opened loses the session: a new one starts on the next node.
   */
  private async replaceChannel(): Promise<void> {
    const retired = this.current;
    try {
      const channel = await this.connection.createConfirmChannel();
      if (!this.open) {
        await channel.close().catch(() => undefined);
        return;
      }
      this.use(channel);
    } catch (error) {
      this.lost("could not open a new publish channel", error instanceof Error ? error : new Error(String(error)));
      return;
    } finally {
      this.endReplacement();
    }
    void retired.publisher.whenIdle().then(() => retired.channel.close()).catch(() => undefined);
  }

  private endReplacement(): void {
    const replacement = this.replacement;
    this.replacement = undefined;
    if (!replacement) return;
    clearTimeout(replacement.timer);
    replacement.done();
  }

  private failed(source: "connection" | "publish channel", error: Error): void {
    this.firstError ??= redactSecrets(error.message);
    this.listener.error?.(this, source, error);
  }
}
