import type { EventKey } from "../../core/event.js";
import type {
  AuditLogPage, AuditRecord, QuarantineCauseCount, QuarantineCount, QuarantineDetail, QuarantineFilter, QuarantineStatus, ResolutionRequest, StoredVersion,
} from "../../core/store-contract/quarantine-admin.js";
import { checkResolvable, noSuchEntry, resolutionOptions } from "../../quarantine/resolution-rules.js";
import type { DedupSummary, PurgeBatchResult, PurgeHorizon, PurgeableRecords, QuarantineHold } from "../../core/store-contract/retention-admin.js";
import { type FailingOutboxRow, type OutboxBacklog, UNROUTABLE_MARK } from "../../core/store-contract/outbox-admin.js";
import { type InboxOperations } from "../../core/store-contract/capabilities.js";
import { inboxTableNames } from "../inbox-tables.js";
import { nullableText } from "../sql/column-reader.js";
import { auditRecordOf, quarantineDetailOf } from "../sql/quarantine-rows.js";
import type { SqlDriver } from "../sql/sql-driver.js";
import type { SqlQuery, SqlRow } from "../sql/sql-query.js";
import { type MysqlDriver, SHORT_READ_COMMITTED } from "./driver.js";
import { mysqlMigrations } from "./migrations.js";
import { QUARANTINE_COLUMNS, listMysqlQuarantine, mysqlQuarantineCauses } from "./quarantine-listing.js";
import { chunked, dateOfMicros, listingLimit, maybeDateOfMicros, micros, mysqlColumns, textOf, utcDatetime, utf8 } from "./values.js";

/**
 * Purge batches give up on a lock after this many seconds instead of queueing behind consumers
 * (and making consumers queue behind them); the cleanup loop runs the batch again.
 */
const PURGE_LOCK_WAIT_TIMEOUT_S = 1;
/** Keys per DELETE statement of a purge batch (a batch of 1000 takes 10 statements). */
const PURGE_DELETE_CHUNKS = [256, 64, 16, 4, 1] as const;
/** ER_NO_SUCH_TABLE */
const NO_SUCH_TABLE = 1146;

const AUDIT_COLUMNS = `id, quarantine_id, action, actor, reason, options, ${micros("at")} AS at, ${micros("published_at")} AS published_at, failure`;

/** The drivers operations run on: the same database, in the transactions each kind of work needs. */
export interface MysqlOperationsDrivers {
  /** Single statements and reads, each committing on its own. */
  autocommit: SqlDriver<unknown>;
  /** Short READ COMMITTED transactions. */
  readCommitted: SqlDriver<unknown>;
  /** READ COMMITTED transactions that give up on a lock after PURGE_LOCK_WAIT_TIMEOUT_S. */
  purge: SqlDriver<unknown>;
}

/** The operations' drivers over a store's own pool. */
export function operationsDriversOn(driver: MysqlDriver): MysqlOperationsDrivers {
  return {
    autocommit: driver,
    readCommitted: driver.withSettings(SHORT_READ_COMMITTED),
    purge: driver.withSettings({ ...SHORT_READ_COMMITTED, lockWaitTimeoutS: PURGE_LOCK_WAIT_TIMEOUT_S }),
  };
}

/**
 * Operator-side access to the MySQL/MariaDB inbox tables: retention (purge horizon, batched
 * purge, quarantine hold), the quarantine's decisions with their audit, and the schema version.
 * Times are UTC (`UTC_TIMESTAMP(6)`, like every time the store writes) and read as microseconds,
 * so neither the server's nor the session's nor the driver's time zone matters. Every write is a
 * short READ COMMITTED transaction of its own (reads see the latest commits, as on PostgreSQL);
 * nothing here runs on the consumers' hot path.
 */
export class MysqlInboxOperations implements InboxOperations {
  readonly dialect = "mysql";
  readonly migrations = mysqlMigrations;
  private readonly t: ReturnType<typeof inboxTableNames>;

  constructor(private readonly drivers: MysqlOperationsDrivers, private readonly prefix: string) {
    this.t = inboxTableNames(prefix);
  }

  async appliedMigrations(): Promise<number[]> {
    try {
      return (await this.read(`SELECT version FROM ${this.t.migrations} ORDER BY version`)).map((r) => Number(r.version));
    } catch (error) {
      if (errnoOf(error) === NO_SUCH_TABLE) return []; // never migrated
      throw error;
    }
  }

  async outboxBacklog(): Promise<OutboxBacklog> {
    const t = `${this.prefix}rabbit_inbox_outbox`;
    const [summary] = await this.read(
      `SELECT COUNT(*) AS pending, COALESCE(SUM(attempts > 0), 0) AS failing,
         COALESCE(SUM(attempts > 0 AND LOCATE(?, last_error) > 0), 0) AS unroutable,
         ${micros("MIN(created_at)")} AS oldest, ${micros("UTC_TIMESTAMP(6)")} AS now
       FROM ${t} WHERE sent_at IS NULL`, [UNROUTABLE_MARK]);
    const [worst] = await this.read(
      `SELECT exchange, routing_key, attempts, last_error FROM ${t}
       WHERE sent_at IS NULL AND attempts > 0 ORDER BY attempts DESC, id LIMIT 1`);
    return {
      pending: Number(summary!.pending), failing: Number(summary!.failing), unroutable: Number(summary!.unroutable),
      oldestPendingAt: maybeDateOfMicros(summary!.oldest), now: dateOfMicros(summary!.now),
      worst: worst ? { exchange: textOf(worst.exchange), routingKey: textOf(worst.routing_key), attempts: Number(worst.attempts), lastError: nullableText(mysqlColumns, worst.last_error) ?? "" } : null,
    };
  }

  async failingOutboxRows(limit: number): Promise<FailingOutboxRow[]> {
    const rows = await this.read(
      `SELECT id, exchange, routing_key, attempts, last_error, ${micros("created_at")} AS created_us, ${micros("available_at")} AS available_us
       FROM ${this.prefix}rabbit_inbox_outbox WHERE sent_at IS NULL AND attempts > 0 ORDER BY attempts DESC, id LIMIT ${listingLimit(limit)}`);
    return rows.map((r) => ({
      id: Number(r.id), exchange: textOf(r.exchange), routingKey: textOf(r.routing_key), attempts: Number(r.attempts),
      lastError: nullableText(mysqlColumns, r.last_error) ?? "", createdAt: dateOfMicros(r.created_us), availableAt: dateOfMicros(r.available_us),
    }));
  }

  async now(): Promise<Date> {
    const [row] = await this.read(`SELECT ${micros("UTC_TIMESTAMP(6)")} AS us`);
    return dateOfMicros(row!.us);
  }

  async purgeHorizons(): Promise<PurgeHorizon[]> {
    const rows = await this.read(
      `SELECT handler, ${micros("purged_through")} AS purged_us, rows_purged, ${micros("updated_at")} AS updated_us
       FROM ${this.t.horizon} ORDER BY handler`,
    );
    return rows.map((r) => ({
      handler: textOf(r.handler), purgedThrough: dateOfMicros(r.purged_us), rowsPurged: Number(r.rows_purged), updatedAt: dateOfMicros(r.updated_us),
    }));
  }

  async dedupSummary(): Promise<DedupSummary[]> {
    const rows = await this.read(
      `SELECT handler, COUNT(*) AS n, ${micros("MIN(first_seen)")} AS oldest_us, ${micros("MAX(first_seen)")} AS newest_us
       FROM ${this.t.dedup} GROUP BY handler ORDER BY handler`,
    );
    return rows.map((r) => ({ handler: textOf(r.handler), records: Number(r.n), oldest: maybeDateOfMicros(r.oldest_us), newest: maybeDateOfMicros(r.newest_us) }));
  }

  async quarantineHold(handler?: string): Promise<QuarantineHold | null> {
    // LEAST is NULL as soon as one argument is: the event time and the stored record count when known.
    // The join compares the quarantine's text columns with the dedup key's bytes: a binary comparison.
    const [r] = await this.read(
      `SELECT q.id, q.handler, q.tenant, q.event_id, q.reason,
         ${micros("LEAST(q.first_seen, COALESCE(q.event_time, q.first_seen), COALESCE(d.first_seen, q.first_seen))")} AS hold_us
       FROM ${this.t.quarantine} q
       LEFT JOIN ${this.t.dedup} d ON d.tenant = q.tenant AND d.handler = q.handler AND d.event_id = q.event_id
       WHERE q.status = 'held'${handler === undefined ? "" : " AND q.handler = ?"}
       ORDER BY hold_us, q.id LIMIT 1`,
      handler === undefined ? [] : [handler],
    );
    if (!r) return null;
    return {
      holdFrom: dateOfMicros(r.hold_us), quarantineId: Number(r.id), handler: textOf(r.handler),
      tenant: nullableText(mysqlColumns, r.tenant), eventId: nullableText(mysqlColumns, r.event_id), reason: textOf(r.reason),
    };
  }

  async countPurgeable(cutoff: Date, handler?: string): Promise<PurgeableRecords> {
    const [r] = await this.read(
      `SELECT COUNT(*) AS n, ${micros("MIN(first_seen)")} AS oldest_us, ${micros("MAX(first_seen)")} AS newest_us FROM ${this.t.dedup}
       WHERE first_seen < ?${handler === undefined ? "" : " AND handler = ?"}`,
      handler === undefined ? [utcDatetime(cutoff)] : [utcDatetime(cutoff), utf8(handler)],
    );
    return { records: Number(r!.n), oldest: maybeDateOfMicros(r!.oldest_us), newest: maybeDateOfMicros(r!.newest_us) };
  }

  async purgeRedeliveryCounts(cutoff: Date, handler?: string): Promise<number> {
    return this.drivers.autocommit.read(async (query) => (await query({
      text: `DELETE FROM ${this.t.redelivery} WHERE last_seen < ?${handler === undefined ? "" : " AND handler = ?"}`,
      values: handler === undefined ? [utcDatetime(cutoff)] : [utcDatetime(cutoff), utf8(handler)],
    })).affected);
  }

  /**
   * One batch, one short READ COMMITTED transaction: pick the oldest rows through the first_seen
   * index `FOR UPDATE SKIP LOCKED` (rows a consumer holds are left for a later batch), delete
   * them by primary key, and raise each handler's horizon to the newest first_seen deleted
   * (GREATEST: never lowered). Any lock wait gives up after 1 s (innodb_lock_wait_timeout) and
   * the cleanup loop runs the batch again. A claim that meets one of these rows while this runs
   * waits for the commit, then reads the new horizon (see mysqlClaimGuards in claim.ts).
   */
  async purgeBatch(cutoff: Date, limit: number, handler?: string): Promise<PurgeBatchResult> {
    const n = Math.max(1, Math.trunc(limit));
    return this.drivers.purge.transaction(({ query }) => this.purgeIn(query, cutoff, n, handler));
  }

  private async purgeIn(query: SqlQuery, cutoff: Date, limit: number, handler: string | undefined): Promise<PurgeBatchResult> {
    const { rows: victims } = await query({
      text: `SELECT tenant, handler, event_id, ${micros("first_seen")} AS first_seen_us FROM ${this.t.dedup}
       WHERE first_seen < ?${handler === undefined ? "" : " AND handler = ?"}
       ORDER BY first_seen LIMIT ${limit}
       FOR UPDATE SKIP LOCKED`,
      values: handler === undefined ? [utcDatetime(cutoff)] : [utcDatetime(cutoff), utf8(handler)],
    });
    if (victims.length === 0) return { deleted: 0, handlers: [] };
    let deleted = 0;
    for (const chunk of chunked(victims, PURGE_DELETE_CHUNKS)) {
      const values: Buffer[] = [];
      for (const v of chunk) values.push(v.tenant as Buffer, v.handler as Buffer, v.event_id as Buffer);
      deleted += (await query({
        text: `DELETE FROM ${this.t.dedup} WHERE ${chunk.map(() => "(tenant = ? AND handler = ? AND event_id = ?)").join(" OR ")}`, values,
      })).affected;
    }
    // Per handler: rows and the newest first_seen, in microseconds (the horizon keeps the precision of first_seen).
    const per = new Map<string, { name: Buffer; rows: number; newestUs: number }>();
    for (const v of victims) {
      const name = v.handler as Buffer;
      const key = name.toString("hex");
      const h = per.get(key) ?? { name, rows: 0, newestUs: -Infinity };
      h.rows++;
      h.newestUs = Math.max(h.newestUs, Number(v.first_seen_us));
      per.set(key, h);
    }
    const handlers: PurgeBatchResult["handlers"] = [];
    // In one order (bytes), so that two purges never lock two horizons the other way round.
    for (const h of [...per.values()].sort((a, b) => Buffer.compare(a.name, b.name))) {
      const through = `TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 00:00:00')`;
      await query({
        text: `INSERT INTO ${this.t.horizon} (handler, purged_through, rows_purged, updated_at) VALUES (?, ${through}, ?, UTC_TIMESTAMP(6))
         ON DUPLICATE KEY UPDATE purged_through = GREATEST(purged_through, ${through}),
           rows_purged = rows_purged + ?, updated_at = UTC_TIMESTAMP(6)`,
        values: [h.name, h.newestUs, h.rows, h.newestUs, h.rows],
      });
      const { rows: [row] } = await query({ text: `SELECT ${micros("purged_through")} AS us FROM ${this.t.horizon} WHERE handler = ?`, values: [h.name] });
      handlers.push({ handler: textOf(h.name), deleted: h.rows, purgedThrough: dateOfMicros(row!.us) });
    }
    return { deleted, handlers: handlers.sort((a, b) => (a.handler < b.handler ? -1 : a.handler > b.handler ? 1 : 0)) };
  }

  listQuarantineEntries(filter: QuarantineFilter = {}): Promise<QuarantineDetail[]> {
    return listMysqlQuarantine((text, values) => this.read(text, values), this.t, filter);
  }

  quarantineCauses(filter: QuarantineFilter = {}): Promise<QuarantineCauseCount[]> {
    return mysqlQuarantineCauses((text, values) => this.read(text, values), this.t, filter);
  }

  async getQuarantineEntry(id: number): Promise<QuarantineDetail | null> {
    const [r] = await this.read(`SELECT ${QUARANTINE_COLUMNS} FROM ${this.t.quarantine} WHERE id = ?`, [id]);
    return r ? detailOf(r) : null;
  }

  async quarantineCounts(): Promise<QuarantineCount[]> {
    const rows = await this.read(
      `SELECT handler, reason, status, COUNT(*) AS n, ${micros("MIN(first_seen)")} AS oldest_us FROM ${this.t.quarantine}
       GROUP BY handler, reason, status ORDER BY handler, status, reason`,
    );
    return rows.map((r) => ({
      handler: textOf(r.handler), reason: textOf(r.reason), status: textOf(r.status) as QuarantineStatus, entries: Number(r.n), oldest: dateOfMicros(r.oldest_us),
    }));
  }

  async storedVersion(handler: string, key: EventKey): Promise<StoredVersion | null> {
    const [r] = await this.read(
      `SELECT fingerprint, ${micros("first_seen")} AS first_seen_us FROM ${this.t.dedup} WHERE tenant = ? AND handler = ? AND event_id = ?`,
      [utf8(key.tenant), utf8(handler), utf8(key.eventId)],
    );
    return r ? { fingerprint: textOf(r.fingerprint), firstSeen: dateOfMicros(r.first_seen_us) } : null;
  }

  async findQuarantinedVersion(handler: string, key: EventKey, fingerprint: string): Promise<QuarantineDetail | null> {
    const [r] = await this.read(
      `SELECT ${QUARANTINE_COLUMNS} FROM ${this.t.quarantine} WHERE handler = ? AND tenant = ? AND event_id = ? AND fingerprint = ? ORDER BY id LIMIT 1`,
      [handler, key.tenant, key.eventId, fingerprint],
    );
    return r ? detailOf(r) : null;
  }

  async quarantineAudit(quarantineId: number): Promise<AuditRecord[]> {
    return (await this.read(`SELECT ${AUDIT_COLUMNS} FROM ${this.t.audit} WHERE quarantine_id = ? ORDER BY id`, [quarantineId])).map(auditOf);
  }

  async auditLog(page: AuditLogPage = {}): Promise<AuditRecord[]> {
    const before = page.beforeId === undefined ? "" : `WHERE id < ${Math.trunc(page.beforeId)}`;
    return (await this.read(`SELECT ${AUDIT_COLUMNS} FROM ${this.t.audit} ${before} ORDER BY id DESC LIMIT ${listingLimit(page.limit ?? 100)}`)).map(auditOf);
  }

  async beginResolution(id: number, request: ResolutionRequest): Promise<AuditRecord> {
    return this.drivers.readCommitted.transaction(async ({ query }) => {
      // The row lock makes a second decision on the entry wait for this one, then see it.
      const { rows: [found] } = await query({ text: `SELECT ${QUARANTINE_COLUMNS} FROM ${this.t.quarantine} WHERE id = ? FOR UPDATE`, values: [id] });
      if (!found) throw noSuchEntry(id);
      const entry = detailOf(found);
      const { rows: [latest] } = await query({ text: `SELECT ${AUDIT_COLUMNS} FROM ${this.t.audit} WHERE quarantine_id = ? ORDER BY id DESC LIMIT 1`, values: [id] });
      const { rows: [stored] } = entry.tenant === null || entry.eventId === null ? { rows: [] } : await query({
        text: `SELECT fingerprint FROM ${this.t.dedup} WHERE tenant = ? AND handler = ? AND event_id = ?`,
        values: [utf8(entry.tenant), utf8(entry.handler), utf8(entry.eventId)],
      });
      checkResolvable(entry, request, { latest: latest ? auditOf(latest) : null, storedFingerprint: stored ? textOf(stored.fingerprint) : null });
      await query({
        text: `INSERT INTO ${this.t.audit} (quarantine_id, action, actor, reason, options) VALUES (?, ?, ?, ?, ?)`,
        values: [id, request.action, request.actor, request.reason, resolutionOptions(entry, request)],
      });
      // The session's LAST_INSERT_ID() is the audit row's id, whatever the driver reports.
      const { rows: [audit] } = await query({ text: `SELECT ${AUDIT_COLUMNS} FROM ${this.t.audit} WHERE id = LAST_INSERT_ID()`, values: [] });
      const record = auditOf(audit!);
      if (request.acceptNew || request.acceptStale) {
        await query({
          text: `INSERT INTO ${this.t.grant} (audit_id, handler, tenant, event_id, kind, stored_fingerprint, fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?)`,
          values: [record.id, utf8(entry.handler), utf8(entry.tenant!), utf8(entry.eventId!), request.acceptNew ? "accept-new" : "accept-stale",
            request.acceptNew && entry.storedFingerprint !== null ? utf8(entry.storedFingerprint) : null, utf8(entry.fingerprint!)],
        });
      }
      await query({ text: `UPDATE ${this.t.quarantine} SET status = ? WHERE id = ?`, values: [request.action === "replay" ? "replayed" : "discarded", id] });
      return record;
    });
  }

  async confirmReplay(auditId: number): Promise<void> {
    await this.drivers.autocommit.read((query) => query({ text: `UPDATE ${this.t.audit} SET published_at = UTC_TIMESTAMP(6) WHERE id = ?`, values: [auditId] }));
  }

  async failReplay(auditId: number, failure: string): Promise<void> {
    await this.drivers.readCommitted.transaction(async ({ query }) => {
      await query({ text: `UPDATE ${this.t.audit} SET failure = ? WHERE id = ?`, values: [failure, auditId] });
      const { rows: [audit] } = await query({ text: `SELECT quarantine_id FROM ${this.t.audit} WHERE id = ?`, values: [auditId] });
      await query({ text: `DELETE FROM ${this.t.grant} WHERE audit_id = ? AND used_at IS NULL`, values: [auditId] });
      // Unless a consumer already quarantined it again (it is then `held` with one more occurrence).
      if (audit) await query({ text: `UPDATE ${this.t.quarantine} SET status = 'held' WHERE id = ? AND status = 'replayed'`, values: [Number(audit.quarantine_id)] });
    });
  }

  private read(text: string, values: readonly unknown[] = []): Promise<SqlRow[]> {
    return this.drivers.autocommit.read(async (query) => (await query({ text, values })).rows);
  }
}

function errnoOf(error: unknown): unknown {
  const cause = (error as { cause?: unknown }).cause;
  return (error as { errno?: unknown }).errno ?? (cause as { errno?: unknown } | undefined)?.errno;
}

function detailOf(r: SqlRow): QuarantineDetail {
  return quarantineDetailOf(mysqlColumns, r);
}

function auditOf(r: SqlRow): AuditRecord {
  return auditRecordOf(mysqlColumns, r);
}
