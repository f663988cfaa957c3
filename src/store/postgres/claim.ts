import type { ClaimResult, InboxClaim } from "../../core/store.js";
import type { PgQuery } from "./pg-client.js";

/**
 * What a PostgreSQL claim checks after its INSERT, inside the same transaction: the stale fence
 * and the operator's one-time replay grants. Neither costs anything on the hot path: the
 * fence runs only for newly inserted keys that carry an event time, the grants only on a
 * conflict or a stale event.
 *
 * Why the horizon is read here, once per claim, AFTER the insert, and never cached:
 * a purge batch deletes rows and advances the horizon in one transaction. A claim of a purged
 * key whose INSERT met the row while that purge was in flight waited for it, then inserted.
 * Under READ COMMITTED every statement takes a new snapshot, so a horizon read in a statement
 * that starts after the INSERT returned necessarily sees the purge that let the INSERT through:
 * "row gone" implies "horizon moved" for this reader. Reading the horizon before the INSERT, in
 * the same statement (one snapshot, taken before the wait), or from a cache would let a claim
 * see the row gone and the old horizon, and apply a purged event a second time. The price is one
 * primary-key read of a one-row-per-handler table per transaction that applies timestamped
 * events, amortised over the batch (500 deliveries by default).
 */
export class PostgresClaimGuards {
  private readonly sql: ReturnType<typeof guardStatements>;

  constructor(prefix: string, tag: string) {
    this.sql = guardStatements(prefix, tag);
  }

  /**
   * Conflicts first (an operator may have let this version replace the stored one), then the
   * stale fence on what was newly inserted. `inserted` marks the claims this transaction inserted.
   */
  async apply(query: PgQuery, handler: string, claims: readonly InboxClaim[], results: ClaimResult[], inserted: readonly boolean[]): Promise<ClaimResult[]> {
    for (let i = 0; i < claims.length; i++) {
      const claim = claims[i]!;
      const result = results[i]!;
      if (result.status === "exists" && result.fingerprint !== claim.fingerprint) {
        if (await this.acceptNewVersion(query, handler, claim, result.fingerprint)) results[i] = { status: "claimed", replaced: result.fingerprint };
      }
    }
    const fenced = claims.flatMap((c, i) => (inserted[i] && c.eventTime !== undefined ? [i] : []));
    if (fenced.length === 0) return results;
    const horizon = await this.horizonMs(query, handler);
    if (horizon === null) return results;
    const stale = fenced.filter((i) => claims[i]!.eventTime!.getTime() <= horizon);
    const refused: number[] = [];
    for (const i of stale) {
      if (!(await this.acceptStale(query, handler, claims[i]!))) refused.push(i);
    }
    if (refused.length === 0) return results;
    // The rows were inserted by this transaction only: take them back, so a later replay (or
    // the operator's grant) finds the key free, exactly as before this delivery.
    await query({
      name: this.sql.unclaimName, text: this.sql.unclaim,
      values: [handler, refused.map((i) => claims[i]!.key.tenant), refused.map((i) => claims[i]!.key.eventId)],
    });
    for (const i of refused) results[i] = { status: "stale", horizon: new Date(horizon) };
    return results;
  }

  /** The handler's purge horizon in epoch ms (floored, so `eventTime <= horizon` is exact for ms times). */
  private async horizonMs(query: PgQuery, handler: string): Promise<number | null> {
    const { rows } = await query({ name: this.sql.horizonName, text: this.sql.horizon, values: [handler] });
    const value = rows[0]?.ms;
    return value === undefined || value === null ? null : Number(value);
  }

  /** Swaps the stored fingerprint for this one if an unused accept-new grant names exactly both. */
  private async acceptNewVersion(query: PgQuery, handler: string, claim: InboxClaim, storedFingerprint: string): Promise<boolean> {
    const { rows } = await query({
      name: this.sql.acceptNewName, text: this.sql.acceptNew,
      values: [handler, claim.key.tenant, claim.key.eventId, storedFingerprint, claim.fingerprint],
    });
    return Number(rows[0]?.n ?? 0) > 0;
  }

  /** Uses an unused accept-stale grant for exactly this version, if there is one. */
  private async acceptStale(query: PgQuery, handler: string, claim: InboxClaim): Promise<boolean> {
    const { rows } = await query({
      name: this.sql.acceptStaleName, text: this.sql.acceptStale,
      values: [handler, claim.key.tenant, claim.key.eventId, claim.fingerprint],
    });
    return rows.length > 0;
  }
}

function guardStatements(prefix: string, tag: string) {
  const grant = `${prefix}rabbit_inbox_replay_grant`;
  return {
    horizonName: `ri_horizon${tag}`,
    horizon: `SELECT floor(extract(epoch FROM purged_through) * 1000)::float8 AS ms FROM ${prefix}rabbit_inbox_purge_horizon WHERE handler = $1`,
    unclaimName: `ri_unclaim${tag}`,
    unclaim: `DELETE FROM ${prefix}rabbit_inbox_dedup d USING unnest($2::text[], $3::text[]) AS t(tenant, event_id)
      WHERE d.handler = $1 AND d.tenant = t.tenant AND d.event_id = t.event_id`,
    // The grant row is locked first, so two consumers holding the same replayed message cannot
    // both use it; the fingerprint swap only happens if the stored version is still the one the
    // operator saw, and the grant is only spent if the swap happened.
    acceptNewName: `ri_accept_new${tag}`,
    acceptNew: `WITH g AS (
        SELECT id FROM ${grant}
        WHERE handler = $1 AND tenant = $2 AND event_id = $3 AND kind = 'accept-new'
          AND stored_fingerprint = $4 AND fingerprint = $5 AND used_at IS NULL
        ORDER BY id LIMIT 1 FOR UPDATE
      ), swapped AS (
        UPDATE ${prefix}rabbit_inbox_dedup SET fingerprint = $5
        WHERE handler = $1 AND tenant = $2 AND event_id = $3 AND fingerprint = $4 AND EXISTS (SELECT 1 FROM g)
        RETURNING 1
      ), spent AS (
        UPDATE ${grant} SET used_at = now() WHERE id IN (SELECT id FROM g) AND EXISTS (SELECT 1 FROM swapped)
        RETURNING id
      )
      SELECT count(*)::int AS n FROM spent`,
    acceptStaleName: `ri_accept_stale${tag}`,
    acceptStale: `UPDATE ${grant} SET used_at = now()
      WHERE id = (
        SELECT id FROM ${grant}
        WHERE handler = $1 AND tenant = $2 AND event_id = $3 AND kind = 'accept-stale' AND fingerprint = $4 AND used_at IS NULL
        ORDER BY id LIMIT 1 FOR UPDATE
      ) AND used_at IS NULL
      RETURNING id`,
  };
}
