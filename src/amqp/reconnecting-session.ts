import { type Backoff, backoffDelay, sleep } from "../core/retry-policy.js";
import type { BrokerConnector } from "./broker-connection.js";
import { BrokerSession, type BrokerSessionListener } from "./broker-session.js";

/**
 * What the keeper of a session reports to its owner, who logs it in its own words: what the
 * current session reports (errors, blocks, nacked channels), and the loss and reconnects.
 */
export interface ReconnectingSessionEvents extends Pick<BrokerSessionListener, "error" | "blocked" | "unblocked" | "publishChannelNacked"> {
  /** The current session is lost. `reconnecting`: a new one is on its way (false once close() began). */
  lost?(session: BrokerSession, what: string, error: Error | undefined, reconnecting: boolean): void;
  /** A new session replaced the lost one, at this attempt (counted from 1). */
  restored?(session: BrokerSession, attempt: number): void;
  /** A reconnect attempt failed; the next follows after the backoff. */
  reconnectFailed?(attempt: number, error: unknown): void;
}

export interface ReconnectingSessionOptions {
  /** Shared by the sessions, so that a reconnect tries the node after the lost one first. */
  connector: BrokerConnector;
  /** Publisher-confirm timeout of the sessions' confirmed publishes, in ms. */
  confirmTimeoutMs: number;
  /** Between reconnect attempts (with jitter, so that clients that lost one node spread out). */
  backoff: Backoff;
  /**
   * Set: a session whose confirm channel gets a nack stops publishing on it and opens a new one
   * on the same connection after this backoff (see BrokerSession). Unset: a nack fails that
   * publish only.
   */
  replaceNackedChannel?: Backoff;
  /**
   * Makes a new session ready for its owner (topology...) before it counts: a rejection closes
   * it and fails the attempt. When close() began meanwhile, the session is closed instead.
   */
  prepare?: (session: BrokerSession) => Promise<void>;
  /**
   * Starts using a session that now counts (its loss is reported from here on): consuming,
   * joining the other replicas. A rejection closes it and fails the attempt.
   */
  activate?: (session: BrokerSession) => Promise<void>;
  events?: ReconnectingSessionEvents;
}

/**
 * A connection to the broker that stays up: one session at a time over the broker's URL list,
 * and after a loss a new one, with backoff and jitter between attempts, until close(). The
 * consumer, the outbox relay and the quarantine replay publisher all keep their connection
 * through this, so a lost node is handled the same way everywhere.
 */
export class ReconnectingSession {
  private current: BrokerSession | undefined;
  private sessions = 0;
  private closing = false;
  private signalClosing!: () => void;
  private readonly closingSignal = new Promise<void>((resolve) => { this.signalClosing = resolve; });
  private reconnectLoop: Promise<void> | undefined;
  private loopRunning = false;
  private sessionWaiters: Array<{ resolve: () => void; abort: Promise<void> | undefined }> = [];
  /**
   * The aborts already subscribed to. A caller waits with the same long-lived promise (its stop
   * signal) after every loss: subscribing again each time would pile reactions on it for as long
   * as it lives, since a promise's reaction cannot be removed.
   */
  private readonly watchedAborts = new WeakSet<Promise<void>>();
  private readonly listener: BrokerSessionListener;

  constructor(private readonly options: ReconnectingSessionOptions) {
    const events = options.events ?? {};
    this.listener = {
      lost: (session, what, error) => this.lost(session, what, error),
      error: (session, source, error) => events.error?.(session, source, error),
      blocked: (session, reason) => events.blocked?.(session, reason),
      unblocked: (session) => events.unblocked?.(session),
      publishChannelNacked: (session, delayMs, inARow) => events.publishChannelNacked?.(session, delayMs, inARow),
    };
  }

  /** The session in use, while it is open. */
  get session(): BrokerSession | undefined {
    return this.current?.isOpen ? this.current : undefined;
  }

  /**
   * Opens the first session. Rejects when no node answers or the session cannot be made ready,
   * and nothing is left open then (nor reconnecting). Resolves with nothing when close() began
   * while it opened.
   */
  async open(): Promise<BrokerSession | undefined> {
    try {
      return await this.openOne();
    } catch (error) {
      this.stopReconnecting();
      throw error;
    }
  }

  /** Resolves once a session is open, or when close() began or `abort` resolved. */
  waitForSession(abort?: Promise<void>): Promise<void> {
    if (this.session || this.closing) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.sessionWaiters.push({ resolve, abort });
      if (abort && !this.watchedAborts.has(abort)) {
        this.watchedAborts.add(abort);
        void abort.then(() => this.wakeSessionWaiters(abort));
      }
    });
  }

  /** Ends reconnecting at once: a loss from now on is reported as final, and a session still opening is closed. */
  stopReconnecting(): void {
    this.closing = true;
    this.signalClosing();
    this.wakeSessionWaiters();
  }

  /** Stops reconnecting, waits for an attempt under way to end, and closes the session. */
  async close(): Promise<void> {
    this.stopReconnecting();
    await this.reconnectLoop;
    await this.current?.close();
  }

  private async openOne(): Promise<BrokerSession | undefined> {
    const session = await BrokerSession.open(++this.sessions, this.options.connector, {
      confirmTimeoutMs: this.options.confirmTimeoutMs, replaceNackedChannel: this.options.replaceNackedChannel,
    }, this.listener);
    try {
      await this.options.prepare?.(session);
      if (this.closing) {
        await session.close();
        return undefined;
      }
      if (!session.isOpen) throw new Error(`the connection to ${session.node} was lost while it opened${session.closeReason ? ` (${session.closeReason})` : ""}`);
      this.current = session;
      await this.options.activate?.(session);
      this.wakeSessionWaiters();
      return session;
    } catch (error) {
      await session.close();
      throw error;
    }
  }

  private lost(session: BrokerSession, what: string, error: Error | undefined): void {
    // A session still being opened: the attempt that opens it fails and says why.
    if (session !== this.current) return;
    const reconnecting = !this.closing;
    this.options.events?.lost?.(session, what, error, reconnecting);
    // Once closing, the owner closes the connection itself, after its own channels.
    if (!reconnecting) return;
    void session.connection.close().catch(() => undefined);
    if (this.loopRunning) return;
    this.loopRunning = true;
    this.reconnectLoop = this.reconnect();
  }

  private async reconnect(): Promise<void> {
    try {
      for (let attempt = 1; !this.closing; attempt++) {
        await sleep(backoffDelay(this.options.backoff, attempt), this.closingSignal);
        if (this.closing) return;
        try {
          const session = await this.openOne();
          if (!session) return;
          // Lost again while it was activated: that loss was reported; try again.
          if (!session.isOpen) continue;
          this.options.events?.restored?.(session, attempt);
          return;
        } catch (error) {
          if (this.closing) return;
          this.options.events?.reconnectFailed?.(attempt, error);
        }
      }
    } finally {
      this.loopRunning = false;
    }
  }

  /** Wakes every waiter, or those that wait with `abort` when it fired. */
  private wakeSessionWaiters(abort?: Promise<void>): void {
    const woken = abort ? this.sessionWaiters.filter((w) => w.abort === abort) : this.sessionWaiters;
    this.sessionWaiters = abort ? this.sessionWaiters.filter((w) => w.abort !== abort) : [];
    for (const { resolve } of woken) resolve();
  }
}
