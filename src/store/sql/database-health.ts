import { InboxError, StoreUnavailableError, describeError } from "../../core/errors.js";
import type { DatabaseHealth } from "../../core/store-contract/store.js";

/**
 * Keeps what the transactions of a store met: an outage (an error of kind `connection`: the
 * database refused the work or could not be reached) makes the database unavailable, with the
 * node and the reason, until a transaction that wrote commits again (a read-only node commits a
 * transaction that only read). Nothing is asked of the database: a health check reads this for free.
 */
export class DatabaseHealthTracker {
  private state: DatabaseHealth = { available: true, node: null, problem: null };

  snapshot(): DatabaseHealth {
    return { ...this.state, ...(this.state.problem ? { problem: { ...this.state.problem } } : {}) };
  }

  /** A transaction that wrote committed: the database takes writes. */
  committed(): void {
    this.state = { available: true, node: this.state.node, problem: null };
  }

  /** A transaction or read succeeded on this node (it may have only read: availability is left as it was). */
  reached(node: string | null): void {
    if (node !== null) this.state = { ...this.state, node };
  }

  /** Records `error` (as classified) when it is an outage; other errors say nothing of the database. */
  failed(error: unknown, node: string | null): void {
    if (!(error instanceof InboxError) || error.kind !== "connection") return;
    const refusal = error instanceof StoreUnavailableError ? error : undefined;
    this.state = {
      available: false,
      node: refusal?.node ?? node ?? this.state.node,
      problem: { since: this.state.problem?.since ?? new Date(), code: error.code, reason: refusal?.reason ?? null, message: describeError(error) },
    };
  }
}
