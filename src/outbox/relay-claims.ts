import { describeError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { HandoffQueue } from "./handoff-queue.js";
import type { RelayHook } from "./outbox-relay-options.js";
import type { OutboxClaim, OutboxRelayStore } from "../core/store-contract/outbox-relay-store.js";

export interface RelayClaimsOptions {
  store: OutboxRelayStore;
  relayName: string;
  batchSize: number;
  leaseMs: number;
  pollIntervalMs: number;
  /** False: never take rows from memory, even where the store could hand them over. */
  handoff: boolean;
  /** The relay deletes the rows it sent: the store may pack the rows it hands over. */
  packs: boolean;
  hook: RelayHook | undefined;
  logger: Logger;
  /** Something to publish came in: the relay's loop should run. */
  wake: () => void;
}

/**
 * Where a relay's next rows come from: the rows this process committed, handed over in memory
 * (where the store can), else a claim of the database, taken only when something may wait
 * there: after a wake-up (a write of due rows, rows made due again, a notification from
 * another process), after a claim that found rows, or once per poll interval (rows of other
 * processes, retries that came due, leases that ran out).
 */
export class RelayClaims {
  private readonly handoff: HandoffQueue | undefined;
  private detachHandoff: (() => void) | undefined;
  private claimDue = true;
  private lastDatabaseClaimAt = 0;

  constructor(private readonly options: RelayClaimsOptions) {
    const { store } = options;
    const settleHandedOff = store.settleHandedOff?.bind(store);
    this.handoff = settleHandedOff && options.handoff
      ? new HandoffQueue({
        leaseMs: options.leaseMs, packs: options.packs, maxRows: 20 * options.batchSize, wake: options.wake,
        settle: async (settlement) => {
          await settleHandedOff(settlement);
          // Rows given back to the claims: this relay claims them too.
          if (settlement.due.length > 0 || settlement.failed.length > 0) this.claimDue = true;
        },
      })
      : undefined;
  }

  /** The database may hold due rows: the next claim asks it. */
  wake(): void {
    this.claimDue = true;
    this.options.wake();
  }

  /** Transactions that start from now on hand their rows to this relay (where the store can). */
  attach(): void {
    if (!this.handoff || this.detachHandoff) return;
    this.handoff.accept();
    this.detachHandoff = this.options.store.outboxSignal.attach(this.handoff);
    this.claimDue = true;
  }

  /** Transactions that start from now on write due rows; the rows in memory stay for `release`. */
  detach(): void {
    this.detachHandoff?.();
    this.detachHandoff = undefined;
  }

  /** Detaches, and gives the rows waiting in memory back to the claims. */
  async release(): Promise<void> {
    this.detach();
    try {
      await this.handoff?.release();
    } catch (error) {
      // Their lease ends by itself: a claim publishes them then.
      this.options.logger.warn("could not hand rows back to the outbox claims; they go out when their lease ends", {
        relay: this.options.relayName, error: describeError(error),
      });
    }
  }

  /** Rows in memory, as a claim, or null: what a draining relay still has to publish from memory. */
  fromMemory(): OutboxClaim | null {
    return this.handoff?.claim(this.options.batchSize) ?? null;
  }

  /** Whether handed-over rows wait in memory. */
  get holdsHandedOff(): boolean {
    return (this.handoff?.size ?? 0) > 0;
  }

  /**
   * Rows in memory first; then, if `database` allows, the database when something may wait
   * there. Runs the `before-publish` hook.
   */
  async next(holding: ReadonlyMap<string, number> | undefined, database: boolean): Promise<OutboxClaim | null> {
    const claim = this.fromMemory() ?? (database ? await this.fromDatabase(holding) : null);
    const hook = this.options.hook;
    if (claim && claim.rows.length > 0 && hook) {
      try {
        await hook("before-publish", claim.rows);
      } catch (error) {
        // Nothing was published: end the claim, its rows stay pending (or go back to the claims).
        await claim.settle({ sent: [], failed: [] }).catch(() => undefined);
        throw error;
      }
    }
    return claim;
  }

  private async fromDatabase(holding: ReadonlyMap<string, number> | undefined): Promise<OutboxClaim | null> {
    const { store, batchSize, relayName, leaseMs, pollIntervalMs } = this.options;
    if (this.handoff && !this.claimDue && Date.now() - this.lastDatabaseClaimAt < pollIntervalMs) return null;
    this.claimDue = false;
    this.lastDatabaseClaimAt = Date.now();
    const claim = await store.claimOutbox({ limit: batchSize, relayId: relayName, leaseMs, ...(holding ? { holding } : {}) });
    // A claim that found rows may have left more behind.
    if (claim) this.claimDue = true;
    return claim;
  }
}
