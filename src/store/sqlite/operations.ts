import type { EventKey } from "../../core/event.js";
import type {
  AuditLogPage, AuditRecord, QuarantineCauseCount, QuarantineCount, QuarantineDetail, QuarantineFilter, QuarantineStatus, ResolutionRequest, StoredVersion,
} from "../../core/store-contract/quarantine-admin.js";
import { checkResolvable, noSuchEntry, resolutionOptions } from "../../quarantine/resolution-rules.js";
import type { DedupSummary, PurgeBatchResult, PurgeHorizon, PurgeableRecords, QuarantineHold } from "../../core/store-contract/retention-admin.js";
import { type FailingOutboxRow, type OutboxBacklog, UNROUTABLE_MARK } from "../../core/store-contract/outbox-admin.js";
import { type InboxOperations } from "../../core/store-contract/capabilities.js";
import { nullableDate, nullableText } from "../sql/column-reader.js";
import { auditRecordOf, quarantineDetailOf } from "../sql/quarantine-rows.js";
import type { SqlDriver } from "../sql/sql-driver.js";
import type { SqlQuery, SqlRow } from "../sql/sql-query.js";
import { sqliteColumns as read } from "./driver.js";
import { sqliteMigrations } from "./migrations.js";
import { listSqliteQuarantine, sqliteQuarantineCauses } from "./quarantine-listing.js";

const detailOf = (r: SqlRow): QuarantineDetail => quarantineDetailOf(read, r);
const auditOf = (r: SqlRow): AuditRecord => auditRecordOf(read, r);

/**
 * Operator-side access to the SQLite inbox tables (times are epoch ms, on this host's clock, like
 * `first_seen`). Its reads and writes take their turn on the store's one connection, so that in
 * one process it never reads or writes in the middle of a consumer's open transaction; other
 * processes wait on the write lock (busy_timeout). A purge batch is one short BEGIN IMMEDIATE
 * transaction.
 */
export class SqliteInboxOperations implements InboxOperations {
  readonly dialect = "sqlite";
  readonly migrations = sqliteMigrations;

  constructor(private readonly driver: SqlDriver<unknown>) {}

  appliedMigrations(): Promise<number[]> {
    return this.driver.read(async (query) => {
      const exists = await query({ text: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rabbit_inbox_migrations'", values: [] });
      if (exists.rows.length === 0) return [];
      const { rows } = await query({ text: "SELECT version FROM rabbit_inbox_migrations ORDER BY version", values: [] });
      return rows.map((r) => Number(r.version));
    });
  }

  outboxBacklog(): Promise<OutboxBacklog> {
    return this.driver.read(async (query) => {
      const summary = await first(query,
        `SELECT COUNT(*) AS pending, COALESCE(SUM(attempts > 0), 0) AS failing,
           COALESCE(SUM(attempts > 0 AND instr(last_error, ?) > 0), 0) AS unroutable, MIN(created_at) AS oldest
         FROM rabbit_inbox_outbox WHERE sent_at IS NULL`, UNROUTABLE_MARK);
      const worst = await first(query,
        `SELECT exchange, routing_key, attempts, last_error FROM rabbit_inbox_outbox
         WHERE sent_at IS NULL AND attempts > 0 ORDER BY attempts DESC, id LIMIT 1`);
      return {
        pending: Number(summary!.pending), failing: Number(summary!.failing), unroutable: Number(summary!.unroutable),
        oldestPendingAt: nullableDate(read, summary!.oldest), now: new Date(),
        worst: worst ? { exchange: read.text(worst.exchange), routingKey: read.text(worst.routing_key), attempts: Number(worst.attempts), lastError: typeof worst.last_error === "string" ? worst.last_error : "" } : null,
      };
    });
  }

  failingOutboxRows(limit: number): Promise<FailingOutboxRow[]> {
    return this.driver.read(async (query) => (await all(query,
      `SELECT id, exchange, routing_key, attempts, last_error, created_at, available_at FROM rabbit_inbox_outbox
       WHERE sent_at IS NULL AND attempts > 0 ORDER BY attempts DESC, id LIMIT ?`, limit)).map((r) => ({
      id: Number(r.id), exchange: read.text(r.exchange), routingKey: read.text(r.routing_key), attempts: Number(r.attempts),
      lastError: nullableText(read, r.last_error) ?? "", createdAt: read.date(r.created_at), availableAt: read.date(r.available_at),
    })));
  }

  now(): Promise<Date> {
    return Promise.resolve(new Date());
  }

  purgeHorizons(): Promise<PurgeHorizon[]> {
    return this.driver.read(async (query) => (await all(query, "SELECT * FROM rabbit_inbox_purge_horizon ORDER BY handler")).map((r) => ({
      handler: read.text(r.handler), purgedThrough: read.date(r.purged_through), rowsPurged: Number(r.rows_purged), updatedAt: read.date(r.updated_at),
    })));
  }

  dedupSummary(): Promise<DedupSummary[]> {
    return this.driver.read(async (query) => (await all(query,
      "SELECT handler, count(*) AS n, min(first_seen) AS oldest, max(first_seen) AS newest FROM rabbit_inbox_dedup GROUP BY handler ORDER BY handler",
    )).map((r) => ({ handler: read.text(r.handler), records: Number(r.n), oldest: nullableDate(read, r.oldest), newest: nullableDate(read, r.newest) })));
  }

  quarantineHold(handler?: string): Promise<QuarantineHold | null> {
    return this.driver.read(async (query) => {
      const r = await first(query,
        `SELECT q.id, q.handler, q.tenant, q.event_id, q.reason,
           min(q.first_seen, coalesce(q.event_time, q.first_seen), coalesce(d.first_seen, q.first_seen)) AS hold_from
         FROM rabbit_inbox_quarantine q
         LEFT JOIN rabbit_inbox_dedup d ON d.tenant = q.tenant AND d.handler = q.handler AND d.event_id = q.event_id
         WHERE q.status = 'held' AND (? IS NULL OR q.handler = ?)
         ORDER BY hold_from, q.id LIMIT 1`, handler ?? null, handler ?? null);
      if (!r) return null;
      return {
        holdFrom: read.date(r.hold_from), quarantineId: Number(r.id), handler: read.text(r.handler),
        tenant: nullableText(read, r.tenant), eventId: nullableText(read, r.event_id), reason: read.text(r.reason),
      };
    });
  }

  countPurgeable(cutoff: Date, handler?: string): Promise<PurgeableRecords> {
    return this.driver.read(async (query) => {
      const r = (await first(query,
        "SELECT count(*) AS n, min(first_seen) AS oldest, max(first_seen) AS newest FROM rabbit_inbox_dedup WHERE first_seen < ? AND (? IS NULL OR handler = ?)",
        cutoff.getTime(), handler ?? null, handler ?? null))!;
      return { records: Number(r.n), oldest: nullableDate(read, r.oldest), newest: nullableDate(read, r.newest) };
    });
  }

  purgeRedeliveryCounts(cutoff: Date, handler?: string): Promise<number> {
    return this.driver.transaction(async ({ query }) => (await query({
      text: "DELETE FROM rabbit_inbox_redelivery WHERE last_seen < ? AND (? IS NULL OR handler = ?)",
      values: [cutoff.getTime(), handler ?? null, handler ?? null],
    })).affected);
  }

  /**
   * The dedup table is WITHOUT ROWID (its primary key is the clustered key), so a batch is
   * chosen by primary key through the first_seen index, oldest first, rather than by rowid.
   */
  purgeBatch(cutoff: Date, limit: number, handler?: string): Promise<PurgeBatchResult> {
    return this.driver.transaction(async ({ query }) => {
      const deleted = await all(query,
        `DELETE FROM rabbit_inbox_dedup WHERE (tenant, handler, event_id) IN (
           SELECT tenant, handler, event_id FROM rabbit_inbox_dedup
           WHERE first_seen < ? AND (? IS NULL OR handler = ?) ORDER BY first_seen LIMIT ?)
         RETURNING handler, first_seen`, cutoff.getTime(), handler ?? null, handler ?? null, limit);
      const per = new Map<string, { deleted: number; newest: number }>();
      for (const r of deleted) {
        const h = per.get(read.text(r.handler)) ?? { deleted: 0, newest: -Infinity };
        h.deleted++;
        h.newest = Math.max(h.newest, Number(r.first_seen));
        per.set(read.text(r.handler), h);
      }
      const handlers: PurgeBatchResult["handlers"] = [];
      for (const [name, h] of [...per].sort(([a], [b]) => (a < b ? -1 : 1))) {
        const row = await first(query,
          `INSERT INTO rabbit_inbox_purge_horizon (handler, purged_through, rows_purged, updated_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (handler) DO UPDATE SET purged_through = max(purged_through, excluded.purged_through),
             rows_purged = rows_purged + excluded.rows_purged, updated_at = excluded.updated_at
           RETURNING purged_through`, name, h.newest, h.deleted, Date.now());
        handlers.push({ handler: name, deleted: h.deleted, purgedThrough: read.date(row!.purged_through) });
      }
      return { deleted: deleted.length, handlers };
    });
  }

  listQuarantineEntries(filter: QuarantineFilter = {}): Promise<QuarantineDetail[]> {
    return listSqliteQuarantine((work) => this.driver.read(work), filter);
  }

  quarantineCauses(filter: QuarantineFilter = {}): Promise<QuarantineCauseCount[]> {
    return this.driver.read((query) => sqliteQuarantineCauses(query, filter));
  }

  getQuarantineEntry(id: number): Promise<QuarantineDetail | null> {
    return this.driver.read(async (query) => {
      const r = await first(query, "SELECT * FROM rabbit_inbox_quarantine WHERE id = ?", id);
      return r ? detailOf(r) : null;
    });
  }

  quarantineCounts(): Promise<QuarantineCount[]> {
    return this.driver.read(async (query) => (await all(query,
      `SELECT handler, reason, status, count(*) AS n, min(first_seen) AS oldest FROM rabbit_inbox_quarantine
       GROUP BY handler, reason, status ORDER BY handler, status, reason`,
    )).map((r) => ({
      handler: read.text(r.handler), reason: read.text(r.reason), status: read.text(r.status) as QuarantineStatus, entries: Number(r.n), oldest: read.date(r.oldest),
    })));
  }

  storedVersion(handler: string, key: EventKey): Promise<StoredVersion | null> {
    return this.driver.read(async (query) => {
      const r = await first(query, "SELECT fingerprint, first_seen FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?",
        key.tenant, handler, key.eventId);
      return r ? { fingerprint: read.text(r.fingerprint), firstSeen: read.date(r.first_seen) } : null;
    });
  }

  findQuarantinedVersion(handler: string, key: EventKey, fingerprint: string): Promise<QuarantineDetail | null> {
    return this.driver.read(async (query) => {
      const r = await first(query,
        "SELECT * FROM rabbit_inbox_quarantine WHERE handler = ? AND tenant = ? AND event_id = ? AND fingerprint = ? ORDER BY id LIMIT 1",
        handler, key.tenant, key.eventId, fingerprint);
      return r ? detailOf(r) : null;
    });
  }

  quarantineAudit(quarantineId: number): Promise<AuditRecord[]> {
    return this.driver.read(async (query) => (await all(query,
      "SELECT * FROM rabbit_inbox_quarantine_audit WHERE quarantine_id = ? ORDER BY id", quarantineId)).map(auditOf));
  }

  auditLog(page: AuditLogPage = {}): Promise<AuditRecord[]> {
    const before = page.beforeId ?? null;
    return this.driver.read(async (query) => (await all(query,
      "SELECT * FROM rabbit_inbox_quarantine_audit WHERE (? IS NULL OR id < ?) ORDER BY id DESC LIMIT ?", before, before, page.limit ?? 100)).map(auditOf));
  }

  beginResolution(id: number, request: ResolutionRequest): Promise<AuditRecord> {
    // BEGIN IMMEDIATE: a second decision on the entry (from any process) waits for this one, then sees it.
    return this.driver.transaction(async ({ query }) => {
      const found = await first(query, "SELECT * FROM rabbit_inbox_quarantine WHERE id = ?", id);
      if (!found) throw noSuchEntry(id);
      const entry = detailOf(found);
      const latest = await first(query, "SELECT * FROM rabbit_inbox_quarantine_audit WHERE quarantine_id = ? ORDER BY id DESC LIMIT 1", id);
      const stored = entry.tenant === null || entry.eventId === null ? undefined
        : await first(query, "SELECT fingerprint FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?", entry.tenant, entry.handler, entry.eventId);
      checkResolvable(entry, request, { latest: latest ? auditOf(latest) : null, storedFingerprint: stored ? read.text(stored.fingerprint) : null });
      const now = Date.now();
      const record = auditOf((await first(query,
        "INSERT INTO rabbit_inbox_quarantine_audit (quarantine_id, action, actor, reason, options, at) VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
        id, request.action, request.actor, request.reason, resolutionOptions(entry, request), now))!);
      if (request.acceptNew || request.acceptStale) {
        await query({
          text: `INSERT INTO rabbit_inbox_replay_grant (audit_id, handler, tenant, event_id, kind, stored_fingerprint, fingerprint, granted_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          values: [record.id, entry.handler, entry.tenant, entry.eventId, request.acceptNew ? "accept-new" : "accept-stale",
            request.acceptNew ? entry.storedFingerprint : null, entry.fingerprint, now],
        });
      }
      await query({ text: "UPDATE rabbit_inbox_quarantine SET status = ? WHERE id = ?", values: [request.action === "replay" ? "replayed" : "discarded", id] });
      return record;
    });
  }

  async confirmReplay(auditId: number): Promise<void> {
    await this.driver.transaction(({ query }) => query({
      text: "UPDATE rabbit_inbox_quarantine_audit SET published_at = ? WHERE id = ?", values: [Date.now(), auditId],
    }));
  }

  failReplay(auditId: number, failure: string): Promise<void> {
    return this.driver.transaction(async ({ query }) => {
      const r = await first(query, "UPDATE rabbit_inbox_quarantine_audit SET failure = ? WHERE id = ? RETURNING quarantine_id", failure, auditId);
      await query({ text: "DELETE FROM rabbit_inbox_replay_grant WHERE audit_id = ? AND used_at IS NULL", values: [auditId] });
      if (r) await query({ text: "UPDATE rabbit_inbox_quarantine SET status = 'held' WHERE id = ? AND status = 'replayed'", values: [r.quarantine_id] });
    });
  }
}

async function all(query: SqlQuery, text: string, ...values: unknown[]): Promise<SqlRow[]> {
  return (await query({ text, values })).rows;
}

async function first(query: SqlQuery, text: string, ...values: unknown[]): Promise<SqlRow | undefined> {
  return (await query({ text, values })).rows[0];
}
