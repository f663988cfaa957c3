import type { EventKey } from "../../core/event.js";
import type {
  AuditRecord, QuarantineCount, QuarantineDetail, QuarantineFilter, QuarantineStatus, ResolutionRequest, StoredVersion,
} from "../../quarantine/quarantine-admin.js";
import { checkResolvable, checkStoredStillSame, noSuchEntry, resolutionOptions } from "../../quarantine/resolution-rules.js";
import type { DedupSummary, PurgeBatchResult, PurgeHorizon, PurgeableRecords, QuarantineHold } from "../../retention/retention-store.js";
import { type InboxOperations, type OutboxBacklog, UNROUTABLE_MARK } from "../operations.js";
import { classifySqliteError } from "./errors.js";
import { sqliteMigrations } from "./migrations.js";
import type { SqliteDatabase } from "./store.js";

type Row = Record<string, unknown>;
type Serialize = <T>(fn: () => Promise<T>) => Promise<T>;

const date = (value: unknown): Date => new Date(Number(value));
const maybeDate = (value: unknown): Date | null => (value === null || value === undefined ? null : new Date(Number(value)));

/**
 * Operator-side access to the SQLite inbox tables (times are epoch ms, on this host's clock, like
 * `first_seen`). Runs through the store's serialization queue, so that in one process it never
 * reads or writes in the middle of a consumer's open transaction; other processes wait on the
 * write lock (busy_timeout). A purge batch is one short BEGIN IMMEDIATE transaction.
 */
export class SqliteInboxOperations implements InboxOperations {
  readonly dialect = "sqlite";
  readonly migrations = sqliteMigrations;

  constructor(private readonly db: SqliteDatabase, private readonly serialize: Serialize) {}

  appliedMigrations(): Promise<number[]> {
    return this.read(() => {
      const exists = this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rabbit_inbox_migrations'").get();
      if (!exists) return [];
      return (this.db.prepare("SELECT version FROM rabbit_inbox_migrations ORDER BY version").all() as Row[]).map((r) => Number(r.version));
    });
  }

  outboxBacklog(): Promise<OutboxBacklog> {
    return this.read(() => {
      const summary = this.db.prepare(
        `SELECT COUNT(*) AS pending, COALESCE(SUM(attempts > 0), 0) AS failing,
           COALESCE(SUM(attempts > 0 AND instr(last_error, ?) > 0), 0) AS unroutable, MIN(created_at) AS oldest
         FROM rabbit_inbox_outbox WHERE sent_at IS NULL`).get(UNROUTABLE_MARK) as Row;
      const worst = this.db.prepare(
        `SELECT exchange, routing_key, attempts, last_error FROM rabbit_inbox_outbox
         WHERE sent_at IS NULL AND attempts > 0 ORDER BY attempts DESC, id LIMIT 1`).get() as Row | undefined;
      return {
        pending: Number(summary.pending), failing: Number(summary.failing), unroutable: Number(summary.unroutable),
        oldestPendingAt: summary.oldest === null ? null : new Date(Number(summary.oldest)), now: new Date(),
        worst: worst ? { exchange: String(worst.exchange), routingKey: String(worst.routing_key), attempts: Number(worst.attempts), lastError: typeof worst.last_error === "string" ? worst.last_error : "" } : null,
      };
    });
  }

  now(): Promise<Date> {
    return Promise.resolve(new Date());
  }

  purgeHorizons(): Promise<PurgeHorizon[]> {
    return this.read(() => (this.db.prepare("SELECT * FROM rabbit_inbox_purge_horizon ORDER BY handler").all() as Row[]).map((r) => ({
      handler: String(r.handler), purgedThrough: date(r.purged_through), rowsPurged: Number(r.rows_purged), updatedAt: date(r.updated_at),
    })));
  }

  dedupSummary(): Promise<DedupSummary[]> {
    return this.read(() => (this.db.prepare(
      "SELECT handler, count(*) AS n, min(first_seen) AS oldest, max(first_seen) AS newest FROM rabbit_inbox_dedup GROUP BY handler ORDER BY handler",
    ).all() as Row[]).map((r) => ({ handler: String(r.handler), records: Number(r.n), oldest: maybeDate(r.oldest), newest: maybeDate(r.newest) })));
  }

  quarantineHold(handler?: string): Promise<QuarantineHold | null> {
    return this.read(() => {
      const r = this.db.prepare(
        `SELECT q.id, q.handler, q.tenant, q.event_id, q.reason,
           min(q.first_seen, coalesce(q.event_time, q.first_seen), coalesce(d.first_seen, q.first_seen)) AS hold_from
         FROM rabbit_inbox_quarantine q
         LEFT JOIN rabbit_inbox_dedup d ON d.tenant = q.tenant AND d.handler = q.handler AND d.event_id = q.event_id
         WHERE q.status = 'held' AND (? IS NULL OR q.handler = ?)
         ORDER BY hold_from, q.id LIMIT 1`,
      ).get(handler ?? null, handler ?? null) as Row | undefined;
      if (!r) return null;
      return {
        holdFrom: date(r.hold_from), quarantineId: Number(r.id), handler: String(r.handler),
        tenant: (r.tenant as string | null) ?? null, eventId: (r.event_id as string | null) ?? null, reason: String(r.reason),
      };
    });
  }

  countPurgeable(cutoff: Date, handler?: string): Promise<PurgeableRecords> {
    return this.read(() => {
      const r = this.db.prepare(
        "SELECT count(*) AS n, min(first_seen) AS oldest, max(first_seen) AS newest FROM rabbit_inbox_dedup WHERE first_seen < ? AND (? IS NULL OR handler = ?)",
      ).get(cutoff.getTime(), handler ?? null, handler ?? null) as Row;
      return { records: Number(r.n), oldest: maybeDate(r.oldest), newest: maybeDate(r.newest) };
    });
  }

  /**
   * The dedup table is WITHOUT ROWID (its primary key is the clustered key), so a batch is
   * chosen by primary key through the first_seen index, oldest first, rather than by rowid.
   */
  purgeRedeliveryCounts(cutoff: Date, handler?: string): Promise<number> {
    return this.write(() => this.db.prepare("DELETE FROM rabbit_inbox_redelivery WHERE last_seen < ? AND (? IS NULL OR handler = ?)")
      .run(cutoff.getTime(), handler ?? null, handler ?? null).changes);
  }

  purgeBatch(cutoff: Date, limit: number, handler?: string): Promise<PurgeBatchResult> {
    return this.write(() => {
      const deleted = this.db.prepare(
        `DELETE FROM rabbit_inbox_dedup WHERE (tenant, handler, event_id) IN (
           SELECT tenant, handler, event_id FROM rabbit_inbox_dedup
           WHERE first_seen < ? AND (? IS NULL OR handler = ?) ORDER BY first_seen LIMIT ?)
         RETURNING handler, first_seen`,
      ).all(cutoff.getTime(), handler ?? null, handler ?? null, limit) as Row[];
      const per = new Map<string, { deleted: number; newest: number }>();
      for (const r of deleted) {
        const h = per.get(String(r.handler)) ?? { deleted: 0, newest: -Infinity };
        h.deleted++;
        h.newest = Math.max(h.newest, Number(r.first_seen));
        per.set(String(r.handler), h);
      }
      const advance = this.db.prepare(
        `INSERT INTO rabbit_inbox_purge_horizon (handler, purged_through, rows_purged, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (handler) DO UPDATE SET purged_through = max(purged_through, excluded.purged_through),
           rows_purged = rows_purged + excluded.rows_purged, updated_at = excluded.updated_at
         RETURNING purged_through`,
      );
      const handlers = [...per].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, h]) => {
        const row = advance.get(name, h.newest, h.deleted, Date.now()) as Row;
        return { handler: name, deleted: h.deleted, purgedThrough: date(row.purged_through) };
      });
      return { deleted: deleted.length, handlers };
    });
  }

  listQuarantineEntries(filter: QuarantineFilter = {}): Promise<QuarantineDetail[]> {
    const status = filter.status ?? "held";
    const s = status === "all" ? null : status;
    return this.read(() => (this.db.prepare(
      `SELECT * FROM rabbit_inbox_quarantine WHERE (? IS NULL OR status = ?) AND (? IS NULL OR handler = ?) AND (? IS NULL OR reason = ?)
       ORDER BY id LIMIT ?`,
    ).all(s, s, filter.handler ?? null, filter.handler ?? null, filter.reason ?? null, filter.reason ?? null, filter.limit ?? 100) as Row[]).map(toDetail));
  }

  getQuarantineEntry(id: number): Promise<QuarantineDetail | null> {
    return this.read(() => {
      const r = this.db.prepare("SELECT * FROM rabbit_inbox_quarantine WHERE id = ?").get(id) as Row | undefined;
      return r ? toDetail(r) : null;
    });
  }

  quarantineCounts(): Promise<QuarantineCount[]> {
    return this.read(() => (this.db.prepare(
      `SELECT handler, reason, status, count(*) AS n, min(first_seen) AS oldest FROM rabbit_inbox_quarantine
       GROUP BY handler, reason, status ORDER BY handler, status, reason`,
    ).all() as Row[]).map((r) => ({
      handler: String(r.handler), reason: String(r.reason), status: String(r.status) as QuarantineStatus, entries: Number(r.n), oldest: date(r.oldest),
    })));
  }

  storedVersion(handler: string, key: EventKey): Promise<StoredVersion | null> {
    return this.read(() => {
      const r = this.db.prepare("SELECT fingerprint, first_seen FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?")
        .get(key.tenant, handler, key.eventId) as Row | undefined;
      return r ? { fingerprint: String(r.fingerprint), firstSeen: date(r.first_seen) } : null;
    });
  }

  findQuarantinedVersion(handler: string, key: EventKey, fingerprint: string): Promise<QuarantineDetail | null> {
    return this.read(() => {
      const r = this.db.prepare(
        "SELECT * FROM rabbit_inbox_quarantine WHERE handler = ? AND tenant = ? AND event_id = ? AND fingerprint = ? ORDER BY id LIMIT 1",
      ).get(handler, key.tenant, key.eventId, fingerprint) as Row | undefined;
      return r ? toDetail(r) : null;
    });
  }

  quarantineAudit(quarantineId: number): Promise<AuditRecord[]> {
    return this.read(() => (this.db.prepare("SELECT * FROM rabbit_inbox_quarantine_audit WHERE quarantine_id = ? ORDER BY id").all(quarantineId) as Row[]).map(toAudit));
  }

  beginResolution(id: number, request: ResolutionRequest): Promise<AuditRecord> {
    return this.write(() => {
      const found = this.db.prepare("SELECT * FROM rabbit_inbox_quarantine WHERE id = ?").get(id) as Row | undefined;
      if (!found) throw noSuchEntry(id);
      const entry = toDetail(found);
      checkResolvable(entry, request);
      if (request.acceptNew) {
        const stored = this.db.prepare("SELECT fingerprint FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?")
          .get(entry.tenant, entry.handler, entry.eventId) as Row | undefined;
        checkStoredStillSame(entry, stored ? String(stored.fingerprint) : null);
      }
      const now = Date.now();
      const audit = this.db.prepare(
        "INSERT INTO rabbit_inbox_quarantine_audit (quarantine_id, action, actor, reason, options, at) VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
      ).get(id, request.action, request.actor, request.reason, resolutionOptions(request), now) as Row;
      const record = toAudit(audit);
      if (request.acceptNew || request.acceptStale) {
        this.db.prepare(
          `INSERT INTO rabbit_inbox_replay_grant (audit_id, handler, tenant, event_id, kind, stored_fingerprint, fingerprint, granted_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(record.id, entry.handler, entry.tenant, entry.eventId, request.acceptNew ? "accept-new" : "accept-stale",
          request.acceptNew ? entry.storedFingerprint : null, entry.fingerprint, now);
      }
      this.db.prepare("UPDATE rabbit_inbox_quarantine SET status = ? WHERE id = ?").run(request.action === "replay" ? "replayed" : "discarded", id);
      return record;
    });
  }

  confirmReplay(auditId: number): Promise<void> {
    return this.write(() => {
      this.db.prepare("UPDATE rabbit_inbox_quarantine_audit SET published_at = ? WHERE id = ?").run(Date.now(), auditId);
    });
  }

  failReplay(auditId: number, failure: string): Promise<void> {
    return this.write(() => {
      const r = this.db.prepare("UPDATE rabbit_inbox_quarantine_audit SET failure = ? WHERE id = ? RETURNING quarantine_id").get(failure, auditId) as Row | undefined;
      this.db.prepare("DELETE FROM rabbit_inbox_replay_grant WHERE audit_id = ? AND used_at IS NULL").run(auditId);
      if (r) this.db.prepare("UPDATE rabbit_inbox_quarantine SET status = 'held' WHERE id = ? AND status = 'replayed'").run(r.quarantine_id);
    });
  }

  private read<T>(work: () => T): Promise<T> {
    return this.serialize(() => {
      try {
        return Promise.resolve(work());
      } catch (error) {
        throw classifySqliteError(error);
      }
    });
  }

  private write<T>(work: () => T): Promise<T> {
    return this.serialize(() => {
      try {
        this.db.exec("BEGIN IMMEDIATE");
        const result = work();
        this.db.exec("COMMIT");
        return Promise.resolve(result);
      } catch (error) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw classifySqliteError(error);
      }
    });
  }
}

function toDetail(r: Row): QuarantineDetail {
  return {
    id: Number(r.id), handler: String(r.handler),
    tenant: (r.tenant as string | null) ?? null, eventId: (r.event_id as string | null) ?? null,
    reason: String(r.reason), detail: String(r.detail), status: String(r.status) as QuarantineStatus,
    fingerprint: (r.fingerprint as string | null) ?? null, storedFingerprint: (r.stored_fingerprint as string | null) ?? null,
    occurrences: Number(r.occurrences), body: r.body as Buffer, bodyTruncated: Boolean(r.body_truncated),
    properties: String(r.properties), queue: String(r.queue), eventTime: maybeDate(r.event_time),
    firstSeen: date(r.first_seen), lastSeen: date(r.last_seen),
  };
}

function toAudit(r: Row): AuditRecord {
  return {
    id: Number(r.id), quarantineId: Number(r.quarantine_id), action: String(r.action) as AuditRecord["action"],
    actor: String(r.actor), reason: String(r.reason), options: String(r.options), at: date(r.at),
    publishedAt: maybeDate(r.published_at), failure: (r.failure as string | null) ?? null,
  };
}
