import { TransientStoreError } from "../../core/errors.js";
import type { ClaimResult, InboxClaim } from "../../core/store-contract/store.js";
import { type ClaimGuardStatements, applyClaimGuards } from "../sql/claim-guards.js";
import type { SqlSession } from "../sql/sql-driver.js";
import type { SqlQuery, SqlResult, SqlRow, SqlStatement } from "../sql/sql-query.js";
import type { ArrayParameters } from "./array-parameters.js";
import { statementTag } from "./prepared-statements.js";

/**
 * A session that can run a statement inside a fresh savepoint: what a batch claim's fast path
 * needs (see insertBatch). A statement that fails leaves the transaction usable through
 * `ROLLBACK TO SAVEPOINT <name>`.
 */
export interface SavepointSession {
  queryInSavepoint(savepoint: string, statement: SqlStatement): Promise<SqlResult>;
}

export function offersSavepoints(session: object): session is SavepointSession {
  return typeof (session as Partial<SavepointSession>).queryInSavepoint === "function";
}

/** The savepoint a batch claim's fast path runs in. */
export const CLAIM_SAVEPOINT = "rabbit_inbox_claim";

/**
 * How PostgreSQL claims keys: one INSERT of the dedup rows (a plain VALUES row for one event, an
 * unnest for a batch), then, for the keys it found already there, a read of their fingerprints,
 * then the stale fence and the replay grants (applyClaimGuards).
 */
export class PostgresClaim {
  private readonly sql: ReturnType<typeof claimStatements>;

  /** `arrays`: how the batch statements' array parameters travel (binary on the store's own pg clients). */
  constructor(prefix: string, schema: string, private readonly arrays: ArrayParameters) {
    this.sql = claimStatements(prefix, statementTag(schema));
  }

  /** `session`, when it offers savepoints, lets a batch claim take the fast path: see insertBatch. */
  async claim(session: SqlSession<unknown>, handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]> {
    const { query } = session;
    const { arrays } = this;
    const single = claims.length === 1 ? claims[0]! : undefined;
    // The keys as arrays: encoded once, and only when a statement below needs them (a lone
    // event's claim that inserted its key needs none).
    let keys: { tenants: unknown; ids: unknown } | undefined;
    const keyArrays = () => keys ??= { tenants: arrays.text(claims.map((c) => c.key.tenant)), ids: arrays.text(claims.map((c) => c.key.eventId)) };
    // One event (strict mode): a plain VALUES insert, cheaper to run than the unnest form.
    const inserted = single
      ? (await query({ name: this.sql.claimOneName, text: this.sql.claimOne, values: [handler, single.key.tenant, single.key.eventId, single.fingerprint] })).rows
      : await this.insertBatch(query, offersSavepoints(session) ? session : undefined, [handler, keyArrays().tenants, keyArrays().ids, arrays.text(claims.map((c) => c.fingerprint))]);
    const allInserted = inserted === null || inserted.length === claims.length;
    const fenced = claims.some((c) => c.eventTime !== undefined);
    if (allInserted && !fenced) return claims.map(() => ({ status: "claimed" }));
    const claimed = allInserted ? null : new Set(inserted.map((r) => JSON.stringify([r.tenant, r.event_id])));
    const isInserted = claims.map((c) => claimed === null || claimed.has(JSON.stringify([c.key.tenant, c.key.eventId])));
    let results: ClaimResult[] = claims.map(() => ({ status: "claimed" }));
    if (!allInserted) {
      // A new statement, so READ COMMITTED sees rows committed by the transactions we waited for.
      const existing = await query({ name: this.sql.existingName, text: this.sql.existing, values: [handler, keyArrays().tenants, keyArrays().ids] });
      const stored = new Map(existing.rows.map((r) => [JSON.stringify([r.tenant, r.event_id]), String(r.fingerprint)]));
      results = claims.map((c, i) => {
        if (isInserted[i]) return { status: "claimed" };
        const fingerprint = stored.get(JSON.stringify([c.key.tenant, c.key.eventId]));
        // Not inserted and not visible: only possible if the row was purged in between. Contention
        // with the purge: running the transaction again finds the key free.
        if (fingerprint === undefined) throw new TransientStoreError("inbox row vanished during claim (purged while this claim waited for it); the transaction runs again");
        return { status: "exists", fingerprint };
      });
    }
    return applyClaimGuards(this.guards(query), handler, claims, results, isInserted);
  }

  /**
   * Inserts a batch's claims; null means every one was inserted, else the rows that were.
   *
   * The fast path, inside a savepoint: a plain INSERT, which either inserts every row or fails
   * on the first key that exists (23505). It costs PostgreSQL less per row than
   * `ON CONFLICT DO NOTHING`, whose speculative insertion adds an index probe, a lock on a
   * speculative token and one more WAL record per row. Redeliveries are claimed one by one
   * elsewhere, so a batch meets an existing key only when a producer sent a duplicate: then the
   * savepoint is rolled back and the `ON CONFLICT` form runs, with the same outcome as if it had
   * run first. A key another transaction is inserting makes either form wait for that
   * transaction, then see its row. A data layer's session offers no savepoint round trip: it runs
   * the `ON CONFLICT` form at once.
   */
  private async insertBatch(query: SqlQuery, savepoints: SavepointSession | undefined, values: unknown[]): Promise<SqlRow[] | null> {
    if (savepoints) {
      try {
        await savepoints.queryInSavepoint(CLAIM_SAVEPOINT, { name: this.sql.claimAllName, text: this.sql.claimAll, values });
        return null;
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code !== "23505") throw error;
        await query({ text: `ROLLBACK TO SAVEPOINT ${CLAIM_SAVEPOINT}`, values: [] });
      }
    }
    return (await query({ name: this.sql.claimName, text: this.sql.claim, values })).rows;
  }

  /**
   * The stale fence and the replay grants on PostgreSQL.
   *
   * Why the horizon read is exact: a purge batch deletes rows and advances the horizon in one
   * transaction. A claim of a purged key whose INSERT met the row while that purge was in flight
   * waited for it, then inserted. Under READ COMMITTED every statement takes a new snapshot, so
   * a horizon read in a statement that starts after the INSERT returned necessarily sees the
   * purge that let the INSERT through: "row gone" implies "horizon moved" for this reader.
   * Reading the horizon before the INSERT, in the same statement (one snapshot, taken before the
   * wait), or from a cache would let a claim see the row gone and the old horizon, and apply a
   * purged event a second time. The price is one primary-key read of a one-row-per-handler table
   * per transaction that applies timestamped events, amortised over the batch.
   */
  private guards(query: SqlQuery): ClaimGuardStatements {
    const { sql, arrays } = this;
    return {
      async horizonMs(handler) {
        const { rows } = await query({ name: sql.horizonName, text: sql.horizon, values: [handler] });
        const value = rows[0]?.ms;
        return value === undefined || value === null ? null : Number(value);
      },
      async acceptNewVersion(handler, claim, storedFingerprint) {
        const { rows } = await query({
          name: sql.acceptNewName, text: sql.acceptNew,
          values: [handler, claim.key.tenant, claim.key.eventId, storedFingerprint, claim.fingerprint],
        });
        return Number(rows[0]?.n ?? 0) > 0;
      },
      async acceptStale(handler, claim) {
        const { rows } = await query({
          name: sql.acceptStaleName, text: sql.acceptStale,
          values: [handler, claim.key.tenant, claim.key.eventId, claim.fingerprint],
        });
        return rows.length > 0;
      },
      async unclaim(handler, claims) {
        await query({ name: sql.unclaimName, text: sql.unclaim, values: [handler, arrays.text(claims.map((c) => c.key.tenant)), arrays.text(claims.map((c) => c.key.eventId))] });
      },
    };
  }
}

function claimStatements(prefix: string, tag: string) {
  const grant = `${prefix}rabbit_inbox_replay_grant`;
  // A batch's rows in delivery-key order: the unique index's locks are taken in that order.
  const claimAll = `INSERT INTO ${prefix}rabbit_inbox_dedup (tenant, handler, event_id, fingerprint)
      SELECT t.tenant, $1, t.event_id, t.fingerprint
      FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS t(tenant, event_id, fingerprint, ord)
      ORDER BY t.ord`;
  return {
    claimAllName: `ri_claim_all${tag}`,
    claimAll,
    claimName: `ri_claim${tag}`,
    claim: `${claimAll}
      ON CONFLICT DO NOTHING
      RETURNING tenant, event_id`,
    claimOneName: `ri_claim_one${tag}`,
    claimOne: `INSERT INTO ${prefix}rabbit_inbox_dedup (tenant, handler, event_id, fingerprint)
      VALUES ($2, $1, $3, $4)
      ON CONFLICT DO NOTHING
      RETURNING tenant, event_id`,
    existingName: `ri_existing${tag}`,
    existing: `SELECT d.tenant, d.event_id, d.fingerprint FROM ${prefix}rabbit_inbox_dedup d
      JOIN unnest($2::text[], $3::text[]) AS t(tenant, event_id) ON d.tenant = t.tenant AND d.event_id = t.event_id
      WHERE d.handler = $1`,
    horizonName: `ri_horizon${tag}`,
    // Floored, so `eventTime <= horizon` is exact for millisecond event times.
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
