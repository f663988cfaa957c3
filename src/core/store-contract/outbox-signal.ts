import type { EventKey } from "../event.js";
import type { OutboxRecord } from "./store.js";

/**
 * A row a committed transaction wrote to the outbox and hands to a relay of the same process,
 * which publishes it at once instead of claiming it back from the database. The row was written
 * with a lease (not due before it ends), so no relay's claim takes it meanwhile; if this process
 * dies first, the lease runs out and any relay's claim publishes it.
 */
export interface HandedOffRow {
  readonly id: number;
  readonly record: OutboxRecord;
  /**
   * The newest row of the same ordering key that was still unsent when this one was written
   * (rows of this key written by the same statement left out), or null: none. The relay
   * publishes the row from memory only when that row is one it published itself; otherwise an
   * earlier row of the key waits in the database, and this one must follow it there.
   */
  readonly previousUnsent: number | null;
  /**
   * The packed row that holds this message, where the store packed the write (see
   * `OutboxHandoff.packs`); absent for a row of its own. Settling the message settles through
   * that row.
   */
  readonly packedIn?: number;
}

/** A relay that takes committed rows from memory (see `HandedOffRow`). */
export interface OutboxHandoff {
  /** How long a handed-off row stays out of every claim, in ms. */
  readonly leaseMs: number;
  /**
   * The relay keeps no sent rows: a store may then write a transaction's messages as one packed
   * row (one row and one index entry for the whole write instead of one per message), which
   * the settlement deletes once every message is confirmed, and unpacks into rows of their own
   * for everything else (a failed publish, rows given back, a lease that ran out).
   */
  readonly packs?: boolean;
  /**
   * Committed rows, in id order. `leasedAt`: epoch ms taken before the rows were written, so
   * their lease ends no earlier than `leasedAt + leaseMs` on this machine's clock.
   */
  take(rows: readonly HandedOffRow[], leasedAt: number): void;
  /**
   * Whether rows that `handler` wrote for the event `key` are in this relay's memory: taken and
   * not yet settled. A duplicate's re-send leaves them alone: they are on their way, and made
   * due a claim would publish them a second time.
   */
  holdsRowsOf?(handler: string, key: EventKey): boolean;
}

/**
 * An in-process wake-up: a store fires it after committing a transaction that wrote outbox
 * rows (or after a duplicate made pending rows due again), and the relays of this process
 * publish at once instead of waiting for their next poll. A relay may also attach itself as the
 * handoff: the store then writes new rows with a lease and gives them to it after the commit.
 */
export class OutboxSignal {
  private readonly listeners = new Set<() => void>();
  private readonly handoffs: OutboxHandoff[] = [];

  /** Returns the function that unsubscribes. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  notify(): void {
    for (const listener of this.listeners) listener();
  }

  /**
   * Makes `handoff` take the rows of the transactions that start from now on (the first one
   * attached, when several relays of one process share a store). Returns the function that
   * detaches it: transactions that start afterwards write due rows, as without a handoff.
   */
  attach(handoff: OutboxHandoff): () => void {
    this.handoffs.push(handoff);
    return () => {
      const at = this.handoffs.indexOf(handoff);
      if (at >= 0) this.handoffs.splice(at, 1);
    };
  }

  /** The relay that takes committed rows, if one is attached. */
  get handoff(): OutboxHandoff | undefined {
    return this.handoffs[0];
  }
}
