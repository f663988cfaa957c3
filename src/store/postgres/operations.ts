import type { EventKey } from "../../core/event.js";
import type {
  AuditLogPage, AuditRecord, QuarantineCauseCount, QuarantineCount, QuarantineDetail, QuarantineFilter, QuarantineStatus, ResolutionRequest, StoredVersion,
} from "../../core/store-contract/quarantine-admin.js";
import { checkResolvable, noSuchEntry, resolutionOptions } from "../../quarantine/resolution-rules.js";
import type { DedupSummary, PurgeBatchResult, PurgeHorizon, PurgeableRecords, QuarantineHold } from "../../core/store-contract/retention-admin.js";
import { type FailingOutboxRow, type OutboxBacklog, UNROUTABLE_MARK } from "../../core/store-contract/outbox-admin.js";
import { type InboxOperations } from "../../core/store-contract/capabilities.js";
import { inboxTableNames } from "../inbox-tables.js";
import { nullableDate, nullableText } from "../sql/column-reader.js";
import { auditRecordOf, quarantineDetailOf } from "../sql/quarantine-rows.js";
import type { SqlDriver } from "../sql/sql-driver.js";
import type { SqlQuery, SqlResult, SqlRow } from "../sql/sql-query.js";
import { postgresColumns as read } from "./columns.js";
import { sqlStateOf } from "./errors.js";
import { postgresMigrations } from "./migrations.js";
import { packedCount, packedNames } from "./packed-outbox.js";
import { listPostgresQuarantine, postgresQuarantineCauses } from "./quarantine-listing.js";

const toDetail = (r: SqlRow): QuarantineDetail => quarantineDetailOf(read, r);
const toAudit = (r: SqlRow): AuditRecord => auditRecordOf(read, r);

/**
 * Purge batches give up on a lock after this long instead of queueing behind consumers (and
 * making consumers queue behind them); the cleanup loop runs the batch again.
 */
const PURGE_LOCK_TIMEOUT = "1s";

/**
 * Operator-side access to the PostgreSQL inbox tables: retention (purge horizon, batched purge,
 * quarantine hold), the quarantine's decisions with their audit, and the schema version.
 * Every write is a short transaction of its own; nothing here runs on the consumers' hot path.
 */
export class PostgresInboxOperations implements InboxOperations {
  readonly dialect = "postgres";
  readonly migrations = postgresMigrations;
  private readonly t: ReturnType<typeof inboxTableNames>;

  constructor(private readonly driver: SqlDriver<unknown>, private readonly prefix: string) {
    this.t = inboxTableNames(prefix);
  }

  async appliedMigrations(): Promise<number[]> {
    try {
      const { rows } = await this.query(`SELECT version FROM ${this.t.migrations} ORDER BY version`);
      return rows.map((r) => Number(r.version));
    } catch (error) {
      if (sqlStateOf(error) === "42P01") return []; // never migrated
      throw error;
    }
  }

  async outboxBacklog(): Promise<OutboxBacklog> {
    const t = `${this.prefix}rabbit_inbox_outbox`;
    // Messages in packed rows are pending too (being published from memory; never failed yet).
    const { rows: [summary] } = await this.query(
      `SELECT count(*)::bigint + ${packedCount(this.prefix)}::bigint AS pending,
         count(*) FILTER (WHERE attempts > 0)::bigint AS failing,
         count(*) FILTER (WHERE attempts > 0 AND strpos(last_error, $1) > 0)::bigint AS unroutable,
         least(min(created_at), (SELECT min(created_at) FROM ${packedNames(this.prefix).table})) AS oldest, clock_timestamp() AS now
       FROM ${t} WHERE sent_at IS NULL`, [UNROUTABLE_MARK]);
    const { rows: [worst] } = await this.query(
      `SELECT exchange, routing_key, attempts, last_error FROM ${t}
       WHERE sent_at IS NULL AND attempts > 0 ORDER BY attempts DESC, id LIMIT 1`);
    return {
      pending: Number(summary!.pending), failing: Number(summary!.failing), unroutable: Number(summary!.unroutable),
      oldestPendingAt: nullableDate(read, summary!.oldest), now: read.date(summary!.now),
      worst: worst ? { exchange: String(worst.exchange), routingKey: String(worst.routing_key), attempts: Number(worst.attempts), lastError: typeof worst.last_error === "string" ? worst.last_error : "" } : null,
    };
  }

  async failingOutboxRows(limit: number): Promise<FailingOutboxRow[]> {
    const { rows } = await this.query(
      `SELECT id, exchange, routing_key, attempts, last_error, created_at, available_at FROM ${this.prefix}rabbit_inbox_outbox
       WHERE sent_at IS NULL AND attempts > 0 ORDER BY attempts DESC, id LIMIT $1`, [limit]);
    return rows.map((r) => ({
      id: Number(r.id), exchange: String(r.exchange), routingKey: String(r.routing_key), attempts: Number(r.attempts),
      lastError: nullableText(read, r.last_error) ?? "", createdAt: read.date(r.created_at), availableAt: read.date(r.available_at),
    }));
  }

  async now(): Promise<Date> {
    const { rows } = await this.query("SELECT clock_timestamp() AS now");
    return read.date(rows[0]!.now);
  }

  async purgeHorizons(): Promise<PurgeHorizon[]> {
    const { rows } = await this.query(`SELECT handler, purged_through, rows_purged, updated_at FROM ${this.t.horizon} ORDER BY handler`);
    return rows.map((r) => ({
      handler: String(r.handler), purgedThrough: read.date(r.purged_through), rowsPurged: Number(r.rows_purged), updatedAt: read.date(r.updated_at),
    }));
  }

  async dedupSummary(): Promise<DedupSummary[]> {
    const { rows } = await this.query(
      `SELECT handler, count(*)::bigint AS n, min(first_seen) AS oldest, max(first_seen) AS newest FROM ${this.t.dedup} GROUP BY handler ORDER BY handler`,
    );
    return rows.map((r) => ({ handler: String(r.handler), records: Number(r.n), oldest: nullableDate(read, r.oldest), newest: nullableDate(read, r.newest) }));
  }

  async quarantineHold(handler?: string): Promise<QuarantineHold | null> {
    // LEAST ignores NULLs: the event time and the stored record are taken when known.
    const { rows } = await this.query(
      `SELECT q.id, q.handler, q.tenant, q.event_id, q.reason, LEAST(q.first_seen, q.event_time, d.first_seen) AS hold_from
       FROM ${this.t.quarantine} q
       LEFT JOIN ${this.t.dedup} d ON d.handler = q.handler AND d.tenant = q.tenant AND d.event_id = q.event_id
       WHERE q.status = 'held' AND ($1::text IS NULL OR q.handler = $1)
       ORDER BY hold_from, q.id LIMIT 1`,
      [handler ?? null],
    );
    const r = rows[0];
    if (!r) return null;
    return {
      holdFrom: read.date(r.hold_from), quarantineId: Number(r.id), handler: String(r.handler),
      tenant: nullableText(read, r.tenant), eventId: nullableText(read, r.event_id), reason: String(r.reason),
    };
  }

  async countPurgeable(cutoff: Date, handler?: string): Promise<PurgeableRecords> {
    const { rows } = await this.query(
      `SELECT count(*)::bigint AS n, min(first_seen) AS oldest, max(first_seen) AS newest FROM ${this.t.dedup}
       WHERE first_seen < $1 AND ($2::text IS NULL OR handler = $2)`,
      [cutoff, handler ?? null],
    );
    const r = rows[0]!;
    return { records: Number(r.n), oldest: nullableDate(read, r.oldest), newest: nullableDate(read, r.newest) };
  }

  /**
   * One batch, one statement, one short transaction: pick the oldest rows by ctid (skipping
   * rows a consumer has locked), delete them, and raise each handler's horizon to the newest
   * first_seen deleted. A claim that meets one of these rows while this runs waits for the
   * commit and then reads the new horizon (see claim.ts).
   */
  async purgeBatch(cutoff: Date, limit: number, handler?: string): Promise<PurgeBatchResult> {
    return this.transaction(async (run) => {
      await run(`SET LOCAL lock_timeout = '${PURGE_LOCK_TIMEOUT}'`);
      const { rows } = await run(
        `WITH victims AS (
           SELECT ctid FROM ${this.t.dedup}
           WHERE first_seen < $1 AND ($3::text IS NULL OR handler = $3)
           ORDER BY first_seen LIMIT $2
           FOR UPDATE SKIP LOCKED
         ), deleted AS (
           DELETE FROM ${this.t.dedup} d USING victims v WHERE d.ctid = v.ctid
           RETURNING d.handler, d.first_seen
         ), per_handler AS (
           SELECT handler, max(first_seen) AS newest, count(*) AS n FROM deleted GROUP BY handler
         ), advanced AS (
           INSERT INTO ${this.t.horizon} AS h (handler, purged_through, rows_purged, updated_at)
           SELECT handler, newest, n, now() FROM per_handler
           ON CONFLICT (handler) DO UPDATE SET
             purged_through = GREATEST(h.purged_through, EXCLUDED.purged_through),
             rows_purged = h.rows_purged + EXCLUDED.rows_purged,
             updated_at = EXCLUDED.updated_at
           RETURNING handler, purged_through
         )
         SELECT p.handler, p.n::bigint AS n, a.purged_through FROM per_handler p JOIN advanced a USING (handler) ORDER BY p.handler`,
        [cutoff, limit, handler ?? null],
      );
      const handlers = rows.map((r) => ({ handler: String(r.handler), deleted: Number(r.n), purgedThrough: read.date(r.purged_through) }));
      return { deleted: handlers.reduce((sum, h) => sum + h.deleted, 0), handlers };
    });
  }

  async purgeRedeliveryCounts(cutoff: Date, handler?: string): Promise<number> {
    const { affected } = await this.query(
      `DELETE FROM ${this.t.redelivery} WHERE last_seen < $1 AND ($2::text IS NULL OR handler = $2)`, [cutoff, handler ?? null]);
    return affected;
  }

  listQuarantineEntries(filter: QuarantineFilter = {}): Promise<QuarantineDetail[]> {
    return listPostgresQuarantine((text, values) => this.query(text, values), this.t, filter);
  }

  quarantineCauses(filter: QuarantineFilter = {}): Promise<QuarantineCauseCount[]> {
    return postgresQuarantineCauses((text, values) => this.query(text, values), this.t, filter);
  }

  async getQuarantineEntry(id: number): Promise<QuarantineDetail | null> {
    const { rows } = await this.query(`SELECT * FROM ${this.t.quarantine} WHERE id = $1`, [id]);
    return rows[0] ? toDetail(rows[0]) : null;
  }

  async quarantineCounts(): Promise<QuarantineCount[]> {
    const { rows } = await this.query(
      `SELECT handler, reason, status, count(*)::bigint AS n, min(first_seen) AS oldest FROM ${this.t.quarantine}
       GROUP BY handler, reason, status ORDER BY handler, status, reason`,
    );
    return rows.map((r) => ({
      handler: String(r.handler), reason: String(r.reason), status: String(r.status) as QuarantineStatus, entries: Number(r.n), oldest: read.date(r.oldest),
    }));
  }

  async storedVersion(handler: string, key: EventKey): Promise<StoredVersion | null> {
    const { rows } = await this.query(
      `SELECT fingerprint, first_seen FROM ${this.t.dedup} WHERE handler = $1 AND tenant = $2 AND event_id = $3`,
      [handler, key.tenant, key.eventId],
    );
    const r = rows[0];
    return r ? { fingerprint: String(r.fingerprint), firstSeen: read.date(r.first_seen) } : null;
  }

  async findQuarantinedVersion(handler: string, key: EventKey, fingerprint: string): Promise<QuarantineDetail | null> {
    const { rows } = await this.query(
      `SELECT * FROM ${this.t.quarantine} WHERE handler = $1 AND tenant = $2 AND event_id = $3 AND fingerprint = $4 ORDER BY id LIMIT 1`,
      [handler, key.tenant, key.eventId, fingerprint],
    );
    return rows[0] ? toDetail(rows[0]) : null;
  }

  async quarantineAudit(quarantineId: number): Promise<AuditRecord[]> {
    const { rows } = await this.query(`SELECT * FROM ${this.t.audit} WHERE quarantine_id = $1 ORDER BY id`, [quarantineId]);
    return rows.map(toAudit);
  }

  async auditLog(page: AuditLogPage = {}): Promise<AuditRecord[]> {
    const { rows } = await this.query(
      `SELECT * FROM ${this.t.audit} WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2`, [page.beforeId ?? null, page.limit ?? 100]);
    return rows.map(toAudit);
  }

  async beginResolution(id: number, request: ResolutionRequest): Promise<AuditRecord> {
    return this.transaction(async (run) => {
      // The row lock makes a second decision on the entry wait for this one, then see it.
      const found = await run(`SELECT * FROM ${this.t.quarantine} WHERE id = $1 FOR UPDATE`, [id]);
      if (!found.rows[0]) throw noSuchEntry(id);
      const entry = toDetail(found.rows[0]);
      const latest = await run(`SELECT * FROM ${this.t.audit} WHERE quarantine_id = $1 ORDER BY id DESC LIMIT 1`, [id]);
      const stored = entry.tenant === null || entry.eventId === null ? null : await run(
        `SELECT fingerprint FROM ${this.t.dedup} WHERE handler = $1 AND tenant = $2 AND event_id = $3`,
        [entry.handler, entry.tenant, entry.eventId],
      );
      checkResolvable(entry, request, {
        latest: latest.rows[0] ? toAudit(latest.rows[0]) : null, storedFingerprint: stored?.rows[0] ? String(stored.rows[0].fingerprint) : null,
      });
      const options = resolutionOptions(entry, request);
      const audit = await run(
        `INSERT INTO ${this.t.audit} (quarantine_id, action, actor, reason, options) VALUES ($1, $2, $3, $4, $5) RETURNING *`,
        [id, request.action, request.actor, request.reason, options],
      );
      const record = toAudit(audit.rows[0]!);
      if (request.acceptNew || request.acceptStale) {
        await run(
          `INSERT INTO ${this.t.grant} (audit_id, handler, tenant, event_id, kind, stored_fingerprint, fingerprint) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [record.id, entry.handler, entry.tenant, entry.eventId, request.acceptNew ? "accept-new" : "accept-stale",
            request.acceptNew ? entry.storedFingerprint : null, entry.fingerprint],
        );
      }
      await run(`UPDATE ${this.t.quarantine} SET status = $2 WHERE id = $1`, [id, request.action === "replay" ? "replayed" : "discarded"]);
      return record;
    });
  }

  async confirmReplay(auditId: number): Promise<void> {
    await this.query(`UPDATE ${this.t.audit} SET published_at = now() WHERE id = $1`, [auditId]);
  }

  async failReplay(auditId: number, failure: string): Promise<void> {
    await this.transaction(async (run) => {
      const { rows } = await run(`UPDATE ${this.t.audit} SET failure = $2 WHERE id = $1 RETURNING quarantine_id`, [auditId, failure]);
      await run(`DELETE FROM ${this.t.grant} WHERE audit_id = $1 AND used_at IS NULL`, [auditId]);
      // Unless a consumer already quarantined it again (it is then `held` with one more occurrence).
      if (rows[0]) await run(`UPDATE ${this.t.quarantine} SET status = 'held' WHERE id = $1 AND status = 'replayed'`, [rows[0].quarantine_id]);
    });
  }

  /** One statement on its own (autocommit). */
  private query(text: string, values: readonly unknown[] = []): Promise<SqlResult> {
    return this.driver.read((query) => query({ text, values }));
  }

  /** A short transaction of its own; `run` sends its statements in it. */
  private transaction<T>(work: (run: (text: string, values?: readonly unknown[]) => Promise<SqlResult>) => Promise<T>): Promise<T> {
    return this.driver.transaction(({ query }) => work(statementsOn(query)));
  }
}

function statementsOn(query: SqlQuery): (text: string, values?: readonly unknown[]) => Promise<SqlResult> {
  return (text, values = []) => query({ text, values });
}
