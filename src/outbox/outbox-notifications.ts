import { describeError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { type Backoff, backoffDelay, sleep } from "../core/retry-policy.js";
import type { OutboxRelayStore, OutboxSubscription } from "../core/store-contract/outbox-relay-store.js";

export interface OutboxNotificationsOptions {
  store: OutboxRelayStore;
  relayName: string;
  logger: Logger;
  /** Between attempts to listen again after the subscription was lost. */
  backoff: Backoff;
  /** A notification came (or some may have been missed): look for due rows now. */
  wake: () => void;
  /** Resolves when the relay stops. */
  stopRequested: Promise<void>;
}

/**
 * The store's cross-process notifications of new outbox rows (PostgreSQL LISTEN), which wake the
 * relay without waiting for its poll. A lost subscription is taken up again with backoff; the
 * relay polls meanwhile, so a notification missed costs latency, never a row.
 */
export class OutboxNotifications {
  private subscription: OutboxSubscription | undefined;
  private relistening = false;
  private stopped = false;

  constructor(private readonly options: OutboxNotificationsOptions) {
    void options.stopRequested.then(() => { this.stopped = true; });
  }

  get listening(): boolean {
    return this.subscription !== undefined;
  }

  /** Subscribes when the store can notify; keeps trying in the background when it cannot yet. */
  async start(): Promise<void> {
    if (!this.options.store.listenOutbox) return;
    if (!(await this.tryListen())) void this.relisten();
  }

  async close(): Promise<void> {
    this.stopped = true;
    await this.subscription?.close().catch(() => undefined);
    this.subscription = undefined;
  }

  private async tryListen(): Promise<boolean> {
    const { store, logger, relayName: relay, wake } = this.options;
    try {
      const subscription = await store.listenOutbox!(wake, (error) => {
        if (this.subscription !== subscription) return;
        this.subscription = undefined;
        if (this.stopped) return;
        logger.warn("outbox notifications lost; polling until listening again", { relay, error: describeError(error) });
        void this.relisten();
      });
      if (this.stopped) {
        await subscription.close().catch(() => undefined);
        return false;
      }
      this.subscription = subscription;
      return true;
    } catch (error) {
      logger.warn("cannot listen for outbox notifications; polling", { relay, error: describeError(error) });
      return false;
    }
  }

  private async relisten(): Promise<void> {
    if (this.relistening) return;
    this.relistening = true;
    try {
      for (let attempt = 1; !this.stopped && !this.subscription; attempt++) {
        await sleep(backoffDelay(this.options.backoff, attempt), this.options.stopRequested);
        if (this.stopped) return;
        // Notifications sent while nobody listened are gone: look now.
        if (await this.tryListen()) this.options.wake();
      }
    } finally {
      this.relistening = false;
    }
  }
}
