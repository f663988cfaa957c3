import type { EventKey } from "../../core/event.js";
import type { Logger } from "../../core/logger.js";
import type {
  AuditRecord, QuarantineCount, QuarantineDetail, QuarantineFilter, QuarantineStatus, ResolutionRequest, StoredVersion,
} from "../../quarantine/quarantine-admin.js";
import { checkResolvable, noSuchEntry, checkStoredStillSame, resolutionOptions } from "../../quarantine/resolution-rules.js";
import type { DedupSummary, PurgeBatchResult, PurgeHorizon, PurgeableRecords, QuarantineHold } from "../../retention/retention-store.js";
import { type InboxOperations, type OutboxBacklog, UNROUTABLE_MARK, inboxTableNames } from "../operations.js";
import { classifyPostgresError, isPostgresConnectionLoss } from "./errors.js";
import { postgresMigrations } from "./migrations.js";
import { queryOnPool } from "./pg-client.js";
import type { PgClient, PgPool, PgQueryResult } from "./store.js";

type Row = Record<string, unknown>;

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
export class PostgresInboxOperations<C extends PgClient = PgClient> implements InboxOperations {
  readonly dialect = "postgres";
  readonly migrations = postgresMigrations;
  private readonly t: ReturnType<typeof inboxTableNames>;

  constructor(private readonly pool: PgPool<C>, private readonly prefix: string, private readonly logger?: Logger) {
    this.t = inboxTableNames(prefix);
  }

  async appliedMigrations(): Promise<number[]> {
    try {
      const { rows } = await this.query(`SELECT version FROM ${this.t.migrations} ORDER BY version`);
      return rows.map((r) => Number(r.version));
    } catch (error) {
      if ((error as { code?: unknown }).code === "42P01") return []; // never migrated
      throw error;
    }
  }

  async outboxBacklog(): Promise<OutboxBacklog> {
    const t = `${this.prefix}rabbit_inbox_outbox`;
    const { rows: [summary] } = await this.query(
      `SELECT count(*)::bigint AS pending, count(*) FILTER (WHERE attempts > 0)::bigint AS failing,
         count(*) FILTER (WHERE attempts > 0 AND strpos(last_error, $1) > 0)::bigint AS unroutable,
         min(created_at) AS oldest, clock_timestamp() AS now
       FROM ${t} WHERE sent_at IS NULL`, [UNROUTABLE_MARK]);
    const { rows: [worst] } = await this.query(
      `SELECT exchange, routing_key, attempts, last_error FROM ${t}
       WHERE sent_at IS NULL AND attempts > 0 ORDER BY attempts DESC, id LIMIT 1`);
    return {
      pending: Number(summary!.pending), failing: Number(summary!.failing), unroutable: Number(summary!.unroutable),
      oldestPendingAt: (summary!.oldest as Date | null) ?? null, now: summary!.now as Date,
      worst: worst ? { exchange: String(worst.exchange), routingKey: String(worst.routing_key), attempts: Number(worst.attempts), lastError: typeof worst.last_error === "string" ? worst.last_error : "" } : null,
    };
  }

  async now(): Promise<Date> {
    const { rows } = await this.query("SELECT clock_timestamp() AS now");
    return rows[0]!.now as Date;
  }

  async purgeHorizons(): Promise<PurgeHorizon[]> {
    const { rows } = await this.query(`SELECT handler, purged_through, rows_purged, updated_at FROM ${this.t.horizon} ORDER BY handler`);
    return rows.map((r) => ({
      handler: String(r.handler), purgedThrough: r.purged_through as Date, rowsPurged: Number(r.rows_purged), updatedAt: r.updated_at as Date,
    }));
  }

  async dedupSummary(): Promise<DedupSummary[]> {
    const { rows } = await this.query(
      `SELECT handler, count(*)::bigint AS n, min(first_seen) AS oldest, max(first_seen) AS newest FROM ${this.t.dedup} GROUP BY handler ORDER BY handler`,
    );
    return rows.map((r) => ({ handler: String(r.handler), records: Number(r.n), oldest: r.oldest as Date | null, newest: r.newest as Date | null }));
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
      holdFrom: r.hold_from as Date, quarantineId: Number(r.id), handler: String(r.handler),
      tenant: (r.tenant as string | null) ?? null, eventId: (r.event_id as string | null) ?? null, reason: String(r.reason),
    };
  }

  async countPurgeable(cutoff: Date, handler?: string): Promise<PurgeableRecords> {
    const { rows } = await this.query(
      `SELECT count(*)::bigint AS n, min(first_seen) AS oldest, max(first_seen) AS newest FROM ${this.t.dedup}
       WHERE first_seen < $1 AND ($2::text IS NULL OR handler = $2)`,
      [cutoff, handler ?? null],
    );
    const r = rows[0]!;
    return { records: Number(r.n), oldest: r.oldest as Date | null, newest: r.newest as Date | null };
  }

  /**
   * One batch, one statement, one short transaction: pick the oldest rows by ctid (skipping
   * rows a consumer has locked), delete them, and raise each handler's horizon to the newest
   * first_seen deleted. A claim that meets one of these rows while this runs waits for the
   * commit and then reads the new horizon (see PostgresClaimGuards).
   */
  async purgeBatch(cutoff: Date, limit: number, handler?: string): Promise<PurgeBatchResult> {
    return this.transaction(async (client) => {
      await client.query(`SET LOCAL lock_timeout = '${PURGE_LOCK_TIMEOUT}'`);
      const { rows } = await client.query(
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
      const handlers = rows.map((r) => ({ handler: String(r.handler), deleted: Number(r.n), purgedThrough: r.purged_through as Date }));
      return { deleted: handlers.reduce((sum, h) => sum + h.deleted, 0), handlers };
    });
  }

  async purgeRedeliveryCounts(cutoff: Date, handler?: string): Promise<number> {
    const { rowCount } = await this.query(
      `DELETE FROM ${this.t.redelivery} WHERE last_seen < $1 AND ($2::text IS NULL OR handler = $2)`, [cutoff, handler ?? null]);
    return rowCount ?? 0;
  }

  async listQuarantineEntries(filter: QuarantineFilter = {}): Promise<QuarantineDetail[]> {
    const status = filter.status ?? "held";
    const { rows } = await this.query(
      `SELECT * FROM ${this.t.quarantine}
       WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR handler = $2) AND ($3::text IS NULL OR reason = $3)
       ORDER BY id LIMIT $4`,
      [status === "all" ? null : status, filter.handler ?? null, filter.reason ?? null, filter.limit ?? 100],
    );
    return rows.map(toDetail);
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
      handler: String(r.handler), reason: String(r.reason), status: String(r.status) as QuarantineStatus, entries: Number(r.n), oldest: r.oldest as Date,
    }));
  }

  async storedVersion(handler: string, key: EventKey): Promise<StoredVersion | null> {
    const { rows } = await this.query(
      `SELECT fingerprint, first_seen FROM ${this.t.dedup} WHERE handler = $1 AND tenant = $2 AND event_id = $3`,
      [handler, key.tenant, key.eventId],
    );
    const r = rows[0];
    return r ? { fingerprint: String(r.fingerprint), firstSeen: r.first_seen as Date } : null;
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

  async beginResolution(id: number, request: ResolutionRequest): Promise<AuditRecord> {
    return this.transaction(async (client) => {
      const found = await client.query(`SELECT * FROM ${this.t.quarantine} WHERE id = $1 FOR UPDATE`, [id]);
      if (!found.rows[0]) throw noSuchEntry(id);
      const entry = toDetail(found.rows[0]);
      checkResolvable(entry, request);
      if (request.acceptNew) {
        const stored = await client.query(
          `SELECT fingerprint FROM ${this.t.dedup} WHERE handler = $1 AND tenant = $2 AND event_id = $3`,
          [entry.handler, entry.tenant, entry.eventId],
        );
        checkStoredStillSame(entry, stored.rows[0] ? String(stored.rows[0].fingerprint) : null);
      }
      const options = resolutionOptions(request);
      const audit = await client.query(
        `INSERT INTO ${this.t.audit} (quarantine_id, action, actor, reason, options) VALUES ($1, $2, $3, $4, $5) RETURNING *`,
        [id, request.action, request.actor, request.reason, options],
      );
      const record = toAudit(audit.rows[0]!);
      if (request.acceptNew || request.acceptStale) {
        await client.query(
          `INSERT INTO ${this.t.grant} (audit_id, handler, tenant, event_id, kind, stored_fingerprint, fingerprint) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [record.id, entry.handler, entry.tenant, entry.eventId, request.acceptNew ? "accept-new" : "accept-stale",
            request.acceptNew ? entry.storedFingerprint : null, entry.fingerprint],
        );
      }
      await client.query(`UPDATE ${this.t.quarantine} SET status = $2 WHERE id = $1`, [id, request.action === "replay" ? "replayed" : "discarded"]);
      return record;
    });
  }

  async confirmReplay(auditId: number): Promise<void> {
    await this.query(`UPDATE ${this.t.audit} SET published_at = now() WHERE id = $1`, [auditId]);
  }

  async failReplay(auditId: number, failure: string): Promise<void> {
    await this.transaction(async (client) => {
      const { rows } = await client.query(`UPDATE ${this.t.audit} SET failure = $2 WHERE id = $1 RETURNING quarantine_id`, [auditId, failure]);
      await client.query(`DELETE FROM ${this.t.grant} WHERE audit_id = $1 AND used_at IS NULL`, [auditId]);
      // Unless a consumer already quarantined it again (it is then `held` with one more occurrence).
      if (rows[0]) await client.query(`UPDATE ${this.t.quarantine} SET status = 'held' WHERE id = $1 AND status = 'replayed'`, [rows[0].quarantine_id]);
    });
  }

  private query(text: string, values: unknown[] = []): Promise<PgQueryResult> {
    return queryOnPool(this.pool, text, values);
  }

  private async transaction<T>(work: (client: C) => Promise<T>): Promise<T> {
    let client: C;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw classifyPostgresError(error);
    }
    let broken = false;
    const onError = (error: Error) => {
      broken = true;
      this.logger?.warn("PostgreSQL session lost during an operator transaction", { error: error.message });
    };
    client.on("error", onError);
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      broken ||= isPostgresConnectionLoss(error);
      if (!broken) await client.query("ROLLBACK").catch(() => { broken = true; });
      throw classifyPostgresError(error);
    } finally {
      client.removeListener("error", onError);
      client.release(broken);
    }
  }
}

function toDetail(r: Row): QuarantineDetail {
  return {
    id: Number(r.id), handler: String(r.handler),
    tenant: (r.tenant as string | null) ?? null, eventId: (r.event_id as string | null) ?? null,
    reason: String(r.reason), detail: String(r.detail), status: String(r.status) as QuarantineStatus,
    fingerprint: (r.fingerprint as string | null) ?? null, storedFingerprint: (r.stored_fingerprint as string | null) ?? null,
    occurrences: Number(r.occurrences), body: r.body as Buffer, bodyTruncated: Boolean(r.body_truncated),
    properties: String(r.properties), queue: String(r.queue), eventTime: (r.event_time as Date | null) ?? null,
    firstSeen: r.first_seen as Date, lastSeen: r.last_seen as Date,
  };
}

function toAudit(r: Row): AuditRecord {
  return {
    id: Number(r.id), quarantineId: Number(r.quarantine_id), action: String(r.action) as AuditRecord["action"],
    actor: String(r.actor), reason: String(r.reason), options: String(r.options), at: r.at as Date,
    publishedAt: (r.published_at as Date | null) ?? null, failure: (r.failure as string | null) ?? null,
  };
}
