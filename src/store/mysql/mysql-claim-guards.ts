import type { ClaimResult, InboxClaim } from "../../core/store.js";
import { type MysqlExec, headerOf, micros, rowsOf, utf8 } from "./mysql-sql.js";

/**
 * What a MySQL claim checks after its INSERT, inside the same transaction: the stale fence
 * and the operator's one-time replay grants, with the PostgreSQL claim's semantics
 * (postgres-claim-guards.ts). Nothing here runs on the hot path: the fence only for newly
 * inserted keys that carry an event time, the grants only on a conflict or a stale event.
 *
 * Why the horizon is read with a LOCKING read, after the INSERT, and never cached:
 * a purge batch deletes rows and raises the horizon in one transaction. A claim whose INSERT met
 * a row that purge was deleting waited for it, then inserted. The horizon read must see that
 * purge. Under REPEATABLE READ (MySQL's default) a plain SELECT reads the snapshot taken at the
 * transaction's first consistent read, which may predate the purge's commit (a handler's read,
 * an earlier statement): it would see the row gone and the old horizon, and apply a purged
 * event a second time. A locking read (`LOCK IN SHARE MODE`, which MySQL 8 also spells FOR
 * SHARE, MariaDB does not) always reads the latest committed version, under every isolation
 * level, and waits for a purge that holds the horizon row. The shared lock it takes lasts until
 * the consumer's COMMIT; a purge then waits for it (with a short lock wait timeout and a retry),
 * never the other way round: the claim has made all its inserts before it takes that lock, so a
 * claim waiting for a purge's rows never holds a lock the purge needs.
 */
export class MysqlClaimGuards {
  private readonly sql: ReturnType<typeof guardStatements>;

  constructor(prefix: string) {
    this.sql = guardStatements(prefix);
  }

  /**
   * Conflicts first (an operator may have let this version replace the stored one), then the
   * stale fence on what was newly inserted. `inserted` marks the claims this transaction inserted.
   */
  async apply(exec: MysqlExec, handler: string, claims: readonly InboxClaim[], results: ClaimResult[], inserted: readonly boolean[]): Promise<ClaimResult[]> {
    for (let i = 0; i < claims.length; i++) {
      const claim = claims[i]!;
      const result = results[i]!;
      if (result.status === "exists" && result.fingerprint !== claim.fingerprint) {
        if (await this.acceptNewVersion(exec, handler, claim, result.fingerprint)) results[i] = { status: "claimed", replaced: result.fingerprint };
      }
    }
    const fenced = claims.flatMap((c, i) => (inserted[i] && c.eventTime !== undefined ? [i] : []));
    if (fenced.length === 0) return results;
    const horizon = await this.horizonMs(exec, handler);
    if (horizon === null) return results;
    const stale = fenced.filter((i) => claims[i]!.eventTime!.getTime() <= horizon);
    for (const i of stale) {
      const claim = claims[i]!;
      if (await this.acceptStale(exec, handler, claim)) continue;
      // Inserted by this transaction only: take it back, so a later replay (or the operator's
      // grant) finds the key free, exactly as before this delivery.
      await exec(this.sql.unclaim, [utf8(claim.key.tenant), utf8(handler), utf8(claim.key.eventId)]);
      results[i] = { status: "stale", horizon: new Date(horizon) };
    }
    return results;
  }

  /** The handler's purge horizon in epoch ms (floored, so `eventTime <= horizon` is exact for ms times). */
  private async horizonMs(exec: MysqlExec, handler: string): Promise<number | null> {
    const [row] = rowsOf(await exec(this.sql.horizon, [utf8(handler)]));
    const value = row?.us;
    return value === undefined || value === null ? null : Math.floor(Number(value) / 1000);
  }

  /**
   * Swaps the stored fingerprint for this one if an unused accept-new grant names exactly both.
   * The grant row is locked first, so two consumers holding the same replayed message cannot
   * both use it; the swap only happens if the stored version is still the one the operator saw,
   * and the grant is only spent if the swap happened.
   */
  private async acceptNewVersion(exec: MysqlExec, handler: string, claim: InboxClaim, storedFingerprint: string): Promise<boolean> {
    const key = [utf8(handler), utf8(claim.key.tenant), utf8(claim.key.eventId)];
    const [grant] = rowsOf(await exec(this.sql.findAcceptNew, [...key, utf8(storedFingerprint), utf8(claim.fingerprint)]));
    if (!grant) return false;
    const swapped = headerOf(await exec(this.sql.swap, [utf8(claim.fingerprint), ...key, utf8(storedFingerprint)]));
    if (swapped.affectedRows !== 1) return false;
    return headerOf(await exec(this.sql.spend, [Number(grant.id)])).affectedRows === 1;
  }

  /** Uses an unused accept-stale grant for exactly this version, if there is one. */
  private async acceptStale(exec: MysqlExec, handler: string, claim: InboxClaim): Promise<boolean> {
    const [grant] = rowsOf(await exec(this.sql.findAcceptStale, [utf8(handler), utf8(claim.key.tenant), utf8(claim.key.eventId), utf8(claim.fingerprint)]));
    if (!grant) return false;
    return headerOf(await exec(this.sql.spend, [Number(grant.id)])).affectedRows === 1;
  }
}

function guardStatements(prefix: string) {
  const grant = `${prefix}rabbit_inbox_replay_grant`;
  return {
    horizon: `SELECT ${micros("purged_through")} AS us FROM ${prefix}rabbit_inbox_purge_horizon WHERE handler = ? LOCK IN SHARE MODE`,
    unclaim: `DELETE FROM ${prefix}rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?`,
    findAcceptNew: `SELECT id FROM ${grant}
      WHERE handler = ? AND tenant = ? AND event_id = ? AND kind = 'accept-new'
        AND stored_fingerprint = ? AND fingerprint = ? AND used_at IS NULL
      ORDER BY id LIMIT 1 FOR UPDATE`,
    // The dedup row is already locked by the claim's INSERT ... ON DUPLICATE KEY UPDATE.
    swap: `UPDATE ${prefix}rabbit_inbox_dedup SET fingerprint = ?
      WHERE handler = ? AND tenant = ? AND event_id = ? AND fingerprint = ?`,
    findAcceptStale: `SELECT id FROM ${grant}
      WHERE handler = ? AND tenant = ? AND event_id = ? AND kind = 'accept-stale' AND fingerprint = ? AND used_at IS NULL
      ORDER BY id LIMIT 1 FOR UPDATE`,
    spend: `UPDATE ${grant} SET used_at = UTC_TIMESTAMP(6) WHERE id = ? AND used_at IS NULL`,
  };
}
