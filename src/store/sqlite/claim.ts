import type { ClaimResult, InboxClaim } from "../../core/store.js";
import type { SqliteDatabase, SqliteStatement } from "./store.js";

/**
 * The stale fence and the operator's one-time replay grants, checked inside an SQLite
 * claim. The claim runs under BEGIN IMMEDIATE, which holds the database's only write lock: no
 * purge (itself a write transaction) can run between the INSERT and the horizon read, so
 * reading the horizon once per claim is exact. Nothing here runs unless a new key carries an
 * event time (fence) or a key conflicts (grants).
 */
export class SqliteClaimGuards {
  private stmts: ReturnType<SqliteClaimGuards["prepare"]> | undefined;

  constructor(private readonly db: SqliteDatabase) {}

  private prepare() {
    const grant = "rabbit_inbox_replay_grant";
    return {
      horizon: this.db.prepare("SELECT purged_through FROM rabbit_inbox_purge_horizon WHERE handler = ?"),
      unclaim: this.db.prepare("DELETE FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?"),
      findAcceptNew: this.db.prepare(`SELECT id FROM ${grant}
        WHERE handler = ? AND tenant = ? AND event_id = ? AND kind = 'accept-new' AND stored_fingerprint = ? AND fingerprint = ? AND used_at IS NULL
        ORDER BY id LIMIT 1`),
      findAcceptStale: this.db.prepare(`SELECT id FROM ${grant}
        WHERE handler = ? AND tenant = ? AND event_id = ? AND kind = 'accept-stale' AND fingerprint = ? AND used_at IS NULL
        ORDER BY id LIMIT 1`),
      spend: this.db.prepare(`UPDATE ${grant} SET used_at = ? WHERE id = ? AND used_at IS NULL`),
      swap: this.db.prepare("UPDATE rabbit_inbox_dedup SET fingerprint = ? WHERE tenant = ? AND handler = ? AND event_id = ? AND fingerprint = ?"),
    };
  }

  private get statements() {
    this.stmts ??= this.prepare();
    return this.stmts;
  }

  /** A fence for one claim call: the horizon is read at most once, and only if needed. */
  fence(handler: string): (claim: InboxClaim) => ClaimResult {
    let horizon: number | null | undefined;
    return (claim) => {
      if (claim.eventTime === undefined) return { status: "claimed" };
      if (horizon === undefined) {
        const row = this.statements.horizon.get(handler) as { purged_through: number } | undefined;
        horizon = row ? Number(row.purged_through) : null;
      }
      if (horizon === null || claim.eventTime.getTime() > horizon) return { status: "claimed" };
      if (this.spendGrant(this.statements.findAcceptStale, [handler, claim.key.tenant, claim.key.eventId, claim.fingerprint])) return { status: "claimed" };
      // Inserted by this transaction only: take it back, the key stays free for a replay.
      this.statements.unclaim.run(claim.key.tenant, handler, claim.key.eventId);
      return { status: "stale", horizon: new Date(horizon) };
    };
  }

  /** Swaps the stored fingerprint for the claim's if an unused accept-new grant names exactly both. */
  acceptNewVersion(handler: string, claim: InboxClaim, storedFingerprint: string): boolean {
    const { findAcceptNew, spend, swap } = this.statements;
    const row = findAcceptNew.get(handler, claim.key.tenant, claim.key.eventId, storedFingerprint, claim.fingerprint) as { id: number } | undefined;
    if (!row) return false;
    if (swap.run(claim.fingerprint, claim.key.tenant, handler, claim.key.eventId, storedFingerprint).changes !== 1) return false;
    spend.run(Date.now(), row.id);
    return true;
  }

  private spendGrant(find: SqliteStatement, params: unknown[]): boolean {
    const row = find.get(...params) as { id: number } | undefined;
    return row !== undefined && this.statements.spend.run(Date.now(), row.id).changes === 1;
  }
}
