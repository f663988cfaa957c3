import { TransientStoreError } from "../../core/errors.js";
import type { ClaimResult, InboxClaim } from "../../core/store-contract/store.js";
import { type ClaimGuardStatements, applyClaimGuards } from "../sql/claim-guards.js";
import type { SqlQuery } from "../sql/sql-query.js";

const INSERT = "INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING";
const EXISTING = "SELECT fingerprint FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?";

/**
 * Claims the keys in order, one INSERT each (SQLite has one writer: no other transaction can
 * hold a key this one waits for), reads the stored fingerprint where a key was taken, then
 * applies the guards.
 */
export async function claimKeys(query: SqlQuery, handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]> {
  const now = Date.now();
  const results: ClaimResult[] = [];
  const inserted: boolean[] = [];
  for (const claim of claims) {
    const { tenant, eventId } = claim.key;
    if ((await query({ text: INSERT, values: [tenant, handler, eventId, claim.fingerprint, now] })).affected === 1) {
      results.push({ status: "claimed" });
      inserted.push(true);
      continue;
    }
    const { rows } = await query({ text: EXISTING, values: [tenant, handler, eventId] });
    // The INSERT met the row and this transaction holds the only write lock, so the row is
    // still there; should it be gone all the same, a retry of the batch claims afresh.
    if (!rows[0]) throw new TransientStoreError(`inbox row for ${handler} ${tenant}/${eventId} neither inserted nor found`);
    results.push({ status: "exists", fingerprint: String(rows[0].fingerprint) });
    inserted.push(false);
  }
  return applyClaimGuards(claimGuards(query), handler, claims, results, inserted);
}

const GRANT = "rabbit_inbox_replay_grant";
const HORIZON = "SELECT purged_through FROM rabbit_inbox_purge_horizon WHERE handler = ?";
const UNCLAIM = "DELETE FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?";
const FIND_ACCEPT_NEW = `SELECT id FROM ${GRANT}
  WHERE handler = ? AND tenant = ? AND event_id = ? AND kind = 'accept-new' AND stored_fingerprint = ? AND fingerprint = ? AND used_at IS NULL
  ORDER BY id LIMIT 1`;
const FIND_ACCEPT_STALE = `SELECT id FROM ${GRANT}
  WHERE handler = ? AND tenant = ? AND event_id = ? AND kind = 'accept-stale' AND fingerprint = ? AND used_at IS NULL
  ORDER BY id LIMIT 1`;
const SPEND = `UPDATE ${GRANT} SET used_at = ? WHERE id = ? AND used_at IS NULL`;
const SWAP = "UPDATE rabbit_inbox_dedup SET fingerprint = ? WHERE tenant = ? AND handler = ? AND event_id = ? AND fingerprint = ?";

/**
 * The stale fence and the replay grants on SQLite. The claim runs under BEGIN IMMEDIATE, which
 * holds the database's only write lock: no purge (itself a write transaction) can run between
 * the INSERT and the horizon read, so one read of the horizon per claim, after the inserts, is
 * exact.
 */
export function claimGuards(query: SqlQuery): ClaimGuardStatements {
  const spend = async (id: unknown) => (await query({ text: SPEND, values: [Date.now(), id] })).affected === 1;
  return {
    async horizonMs(handler) {
      const { rows } = await query({ text: HORIZON, values: [handler] });
      return rows[0] ? Number(rows[0].purged_through) : null;
    },
    async acceptNewVersion(handler, claim, storedFingerprint) {
      const { tenant, eventId } = claim.key;
      const { rows } = await query({ text: FIND_ACCEPT_NEW, values: [handler, tenant, eventId, storedFingerprint, claim.fingerprint] });
      if (!rows[0]) return false;
      const swapped = await query({ text: SWAP, values: [claim.fingerprint, tenant, handler, eventId, storedFingerprint] });
      if (swapped.affected !== 1) return false;
      await spend(rows[0].id);
      return true;
    },
    async acceptStale(handler, claim) {
      const { rows } = await query({ text: FIND_ACCEPT_STALE, values: [handler, claim.key.tenant, claim.key.eventId, claim.fingerprint] });
      return rows[0] !== undefined && spend(rows[0].id);
    },
    async unclaim(handler, claims) {
      for (const claim of claims) await query({ text: UNCLAIM, values: [claim.key.tenant, handler, claim.key.eventId] });
    },
  };
}
