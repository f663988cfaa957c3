import { InboxConfigError, InvalidEventError, TransientStoreError } from "../../core/errors.js";
import type { ClaimResult, InboxClaim } from "../../core/store-contract/store.js";
import { type ClaimGuardStatements, applyClaimGuards } from "../sql/claim-guards.js";
import type { SqlQuery } from "../sql/sql-query.js";
import { MYSQL_MAX_FINGERPRINT_BYTES, MYSQL_MAX_HANDLER_BYTES, MYSQL_MAX_ID_BYTES } from "./migrations.js";
import { chunked, micros, textOf, utf8 } from "./values.js";

/**
 * Rows per claim statement: powers of two up to 256 (a batch of 500 in 6 statements rather than
 * 10 of at most 64), so a connection still prepares few distinct texts.
 */
const CLAIM_CHUNKS = [256, 128, 64, 32, 16, 8, 4, 2, 1] as const;

/** One claim's key as the dedup table stores it. */
interface KeyBytes {
  tenant: Buffer;
  eventId: Buffer;
  fingerprint: Buffer;
}

/**
 * How MySQL / MariaDB (InnoDB) claims keys: one multi-row
 * `INSERT ... ON DUPLICATE KEY UPDATE seen_again = seen_again + 1` per chunk, rows in the given
 * (sorted) order so that concurrent batches lock keys in one order. A key held by a concurrent
 * uncommitted transaction waits for it, then inserts (it rolled back) or takes the duplicate
 * branch (it committed): the primary key decides, never a prior SELECT. The affected-row count
 * (1 per insert, 2 per duplicate) says whether any key was a duplicate; only then a second
 * statement reads which, and the stored fingerprints.
 *
 * That read is a locking read (`FOR UPDATE`) on purpose. Under REPEATABLE READ, MySQL's
 * default, a plain SELECT reads the snapshot taken at the transaction's first consistent read,
 * which can predate the commit of the row we just waited for: the row would look absent. (The
 * duplicate branch's own update happens to make the row visible to this transaction anyway; the
 * claim does not lean on that.) A locking read always reads the latest committed version plus
 * our own changes, under every isolation level, so the store need not force READ COMMITTED on
 * the user's business SQL, nor spend a round trip per transaction on `SET TRANSACTION`. It takes
 * no new lock: the insert or the duplicate branch already holds an exclusive lock on each row.
 *
 * Then the stale fence and the operator's replay grants (applyClaimGuards, over
 * mysqlClaimGuards). Written against SqlQuery: the same statements run on the store's own
 * connections and through a data layer's transaction.
 */
export async function claimKeys(query: SqlQuery, prefix: string, handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]> {
  const handlerBytes = handlerKey(handler);
  const rows = claims.map((c): KeyBytes => ({ ...eventKeyBytes(c.key.tenant, c.key.eventId), fingerprint: fingerprintBytes(c.fingerprint) }));
  // The duplicate branch would take our own earlier row in the statement for someone else's.
  if (new Set(rows.map((r) => keyOf(r.tenant, r.eventId))).size !== rows.length) {
    throw new InboxConfigError("claim keys must be distinct within one call");
  }
  const results: ClaimResult[] = [];
  for (const chunk of chunked(rows, CLAIM_CHUNKS)) results.push(...(await claimChunk(query, prefix, handlerBytes, chunk)));
  const inserted = results.map((r) => r.status === "claimed");
  return applyClaimGuards(mysqlClaimGuards(query, prefix), handler, claims, results, inserted);
}

async function claimChunk(query: SqlQuery, prefix: string, handler: Buffer, rows: readonly KeyBytes[]): Promise<ClaimResult[]> {
  const values: Buffer[] = [];
  for (const r of rows) values.push(r.tenant, handler, r.eventId, r.fingerprint);
  const inserted = await query({
    text: `INSERT INTO ${prefix}rabbit_inbox_dedup (tenant, handler, event_id, fingerprint)
       VALUES ${rows.map(() => "(?, ?, ?, ?)").join(", ")}
       ON DUPLICATE KEY UPDATE seen_again = seen_again + 1`,
    values,
  });
  if (inserted.affected === rows.length) return rows.map(() => ({ status: "claimed" }));

  const keyValues: Buffer[] = [handler];
  for (const r of rows) keyValues.push(r.tenant, r.eventId);
  const found = await query({
    text: `SELECT tenant, event_id, fingerprint, seen_again FROM ${prefix}rabbit_inbox_dedup
       WHERE handler = ? AND (${rows.map(() => "(tenant = ? AND event_id = ?)").join(" OR ")})
       FOR UPDATE`,
    values: keyValues,
  });
  const byKey = new Map(found.rows.map((f) => [keyOf(f.tenant as Buffer, f.event_id as Buffer), f]));
  return rows.map((r): ClaimResult => {
    const row = byKey.get(keyOf(r.tenant, r.eventId));
    if (!row) {
      // We hold a lock on every key we inserted or found, so this cannot happen; if it does,
      // running the transaction again is the safe answer.
      throw new TransientStoreError("inbox row neither inserted nor found during claim");
    }
    // Keys are distinct: a row still at 0 is the one this statement inserted.
    if (Number(row.seen_again) === 0) return { status: "claimed" };
    return { status: "exists", fingerprint: textOf(row.fingerprint) };
  });
}

/**
 * The stale fence's and the replay grants' statements on MySQL, in the claim's transaction.
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
export function mysqlClaimGuards(query: SqlQuery, prefix: string): ClaimGuardStatements {
  const grant = `${prefix}rabbit_inbox_replay_grant`;
  const spend = async (id: unknown) =>
    (await query({ text: `UPDATE ${grant} SET used_at = UTC_TIMESTAMP(6) WHERE id = ? AND used_at IS NULL`, values: [Number(id)] })).affected === 1;
  return {
    async horizonMs(handler) {
      const { rows } = await query({
        text: `SELECT ${micros("purged_through")} AS us FROM ${prefix}rabbit_inbox_purge_horizon WHERE handler = ? LOCK IN SHARE MODE`,
        values: [utf8(handler)],
      });
      const value = rows[0]?.us;
      // Floored, so `eventTime <= horizon` is exact for millisecond times.
      return value === undefined || value === null ? null : Math.floor(Number(value) / 1000);
    },
    // The grant row is locked first, so two consumers holding the same replayed message cannot
    // both use it; the swap only happens if the stored version is still the one the operator saw.
    async acceptNewVersion(handler, claim, storedFingerprint) {
      const key = [utf8(handler), utf8(claim.key.tenant), utf8(claim.key.eventId)];
      const { rows: [found] } = await query({
        text: `SELECT id FROM ${grant}
          WHERE handler = ? AND tenant = ? AND event_id = ? AND kind = 'accept-new'
            AND stored_fingerprint = ? AND fingerprint = ? AND used_at IS NULL
          ORDER BY id LIMIT 1 FOR UPDATE`,
        values: [...key, utf8(storedFingerprint), utf8(claim.fingerprint)],
      });
      if (!found) return false;
      // The dedup row is already locked by the claim's INSERT ... ON DUPLICATE KEY UPDATE.
      const swapped = await query({
        text: `UPDATE ${prefix}rabbit_inbox_dedup SET fingerprint = ? WHERE handler = ? AND tenant = ? AND event_id = ? AND fingerprint = ?`,
        values: [utf8(claim.fingerprint), ...key, utf8(storedFingerprint)],
      });
      return swapped.affected === 1 && spend(found.id);
    },
    async acceptStale(handler, claim) {
      const { rows: [found] } = await query({
        text: `SELECT id FROM ${grant}
          WHERE handler = ? AND tenant = ? AND event_id = ? AND kind = 'accept-stale' AND fingerprint = ? AND used_at IS NULL
          ORDER BY id LIMIT 1 FOR UPDATE`,
        values: [utf8(handler), utf8(claim.key.tenant), utf8(claim.key.eventId), utf8(claim.fingerprint)],
      });
      return found !== undefined && spend(found.id);
    },
    // Inserted by this transaction only: taken back, so a later replay (or the operator's grant)
    // finds the key free, exactly as before this delivery.
    async unclaim(handler, claims) {
      for (const claim of claims) {
        await query({
          text: `DELETE FROM ${prefix}rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?`,
          values: [utf8(claim.key.tenant), utf8(handler), utf8(claim.key.eventId)],
        });
      }
    },
  };
}

/** The handler's name as the key column holds it; a name the column cannot hold is a configuration error. */
function handlerKey(handler: string): Buffer {
  const bytes = utf8(handler);
  if (bytes.length > MYSQL_MAX_HANDLER_BYTES) {
    throw new InboxConfigError(`handler name is ${bytes.length} UTF-8 bytes; the MySQL store allows ${MYSQL_MAX_HANDLER_BYTES}`);
  }
  return bytes;
}

/**
 * An event's key as the key columns hold it. Checked here rather than left to the column:
 * without strict sql_mode MySQL would cut an over-long id silently, and two distinct events
 * would share a key.
 */
export function eventKeyBytes(tenant: string, eventId: string): { tenant: Buffer; eventId: Buffer } {
  const key = { tenant: utf8(tenant), eventId: utf8(eventId) };
  if (key.tenant.length > MYSQL_MAX_ID_BYTES || key.eventId.length > MYSQL_MAX_ID_BYTES) {
    throw new InvalidEventError(`tenant or event id longer than ${MYSQL_MAX_ID_BYTES} UTF-8 bytes, the MySQL store's limit`);
  }
  return key;
}

function fingerprintBytes(fingerprint: string): Buffer {
  const bytes = utf8(fingerprint);
  if (bytes.length > MYSQL_MAX_FINGERPRINT_BYTES) {
    throw new InboxConfigError(`payload fingerprint longer than ${MYSQL_MAX_FINGERPRINT_BYTES} UTF-8 bytes`);
  }
  return bytes;
}

function keyOf(tenant: Buffer, eventId: Buffer): string {
  return `${tenant.toString("hex")}:${eventId.toString("hex")}`;
}
