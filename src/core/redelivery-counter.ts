import { describeError, errorKindOf } from "./errors.js";
import { type IncomingMessage, isRedelivery } from "./incoming-message.js";
import type { Logger } from "./logger.js";
import type { Prepared, Ready } from "./prepared-message.js";
import { type WorkResult, transactionOrRollBack } from "./rollback.js";
import type { Store } from "./store-contract/store.js";

/**
 * Counts redeliveries in the store, committed before the events' own transaction, so that a
 * message that crashes its consumer every time reaches the poison threshold even though nothing
 * it touched ever commits. With a store that cannot count, the broker's `x-delivery-count` is
 * all there is (quorum queues).
 */
export class RedeliveryCounter<E, Tx> {
  /** False once the store showed it has no `countRedelivery`: then only `x-delivery-count` counts. */
  private storeCounts = true;

  constructor(private readonly store: Store<Tx>, private readonly handlerName: string, private readonly logger: Logger) {}

  /** Whether these messages need counting first: some were delivered before, and the store counts. */
  needed(messages: readonly IncomingMessage[]): boolean {
    return this.storeCounts && messages.some((m) => isRedelivery(m.delivery));
  }

  /**
   * A batch whose redelivered events are all redelivered for the first time (the store has no
   * count for any of them): counted in one committed transaction, and returned with a count of
   * 1 each, to run as one batch. A hand-over or a lost connection gives deliveries back this way,
   * and they need not crawl through one transaction each. Returns undefined, having counted
   * nothing (the transaction rolls back), when one was counted before: this batch may hold what
   * crashed a consumer, and the caller runs each message alone. Also undefined when the count
   * fails (each is then counted alone).
   */
  async firstTimeBatch(messages: readonly IncomingMessage[], prepared: readonly Prepared<E>[]): Promise<Prepared<E>[] | undefined> {
    const redelivered = prepared.map((p, i) => p.ok && isRedelivery(messages[i]!.delivery));
    const keys = new Map<string, Ready<E>["key"]>();
    prepared.forEach((p, i) => { if (p.ok && redelivered[i]) keys.set(p.keyString, p.key); });
    // Commits whether the store counts at all; rolls back when an event was counted before.
    let result: WorkResult<boolean, undefined>;
    try {
      result = await transactionOrRollBack<Tx, boolean, undefined>(this.store, async (tx) => {
        if (!tx.countRedelivery) return { commit: false };
        for (const key of keys.values()) {
          if ((await tx.countRedelivery(this.handlerName, key)) !== 1) return { rollBack: undefined };
        }
        return { commit: true };
      });
    } catch (error) {
      this.logger.debug("could not count a batch's redeliveries at once; each message is counted on its own", { handler: this.handlerName, error: describeError(error) });
      return undefined;
    }
    if ("rollBack" in result) return undefined;
    if (!result.commit) {
      this.storeCounts = false;
      return [...prepared];
    }
    return prepared.map((p, i) => (p.ok && redelivered[i] ? { ...p, redeliveries: 1 } : p));
  }

  /**
   * The store's count of this event's redeliveries, committed in a transaction of its own.
   * Falls back on the broker's count when the store cannot count (or fails to). Called only
   * while `needed`, so while the store is not known to lack the count.
   */
  async one(message: IncomingMessage, p: Ready<E>): Promise<number> {
    try {
      const counted = await this.store.transaction((tx) => (tx.countRedelivery ? tx.countRedelivery(this.handlerName, p.key) : Promise.resolve(undefined)));
      if (counted !== undefined) return counted;
      this.storeCounts = false;
    } catch (error) {
      // The database is out: the attempt meets the same outage, or applies if it ended meanwhile.
      // The broker's count would only show how often the outage gave this delivery back.
      if (errorKindOf(error) === "connection") return 0;
      this.logger.warn("could not count a redelivery; poison detection falls back on the broker's delivery count", {
        handler: this.handlerName, tenant: p.key.tenant, eventId: p.key.eventId, error: describeError(error),
      });
    }
    return message.delivery.deliveryCount ?? 0;
  }
}
