import { InboxConfigError, TransientStoreError } from "../../core/errors.js";
import type { EventKey } from "../../core/event.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import {
  type ClaimResult, type InboxClaim, type QuarantineEntry, type QuarantineRecord, type Store, type StoreTransaction,
  quarantineDedupKey,
} from "../../core/store.js";
import { Outbox } from "../../outbox/outbox.js";
import { OutboxSignal } from "../../outbox/outbox-signal.js";
import type { OutboxClaim, OutboxRelayStore, OutboxSubscription } from "../../outbox/outbox-store.js";
import { loadDriver } from "../load-driver.js";
import { classifyPostgresError, isPostgresConnectionLoss } from "./classify-postgres-error.js";
import { postgresMigrations } from "./migrations.js";
import { PostgresOutbox } from "./postgres-outbox.js";
import { PostgresClaimGuards } from "./postgres-claim-guards.js";
import { PostgresInboxOperations } from "./postgres-operations.js";

/** The slice of node-postgres the store uses; `pg.Pool` and `pg.PoolClient` fit it. */
export interface PgQueryResult {
  rows: Array<Record<string, unknown>>;
  rowCount: number | null;
}
export interface PgClient {
  query(config: { text: string; values?: unknown[]; name?: string }): Promise<PgQueryResult>;
  query(text: string, values?: unknown[]): Promise<PgQueryResult>;
  release(destroy?: boolean | Error): void;
  on(event: "error", listener: (error: Error) => void): unknown;
  removeListener(event: "error", listener: (error: Error) => void): unknown;
}
export interface PgPool<C extends PgClient = PgClient> {
  connect(): Promise<C>;
  end(): Promise<void>;
  on(event: "error", listener: (error: Error) => void): unknown;
}

export interface PostgresStoreOptions<C extends PgClient> {
  /** A pg Pool. The store never ends a pool it did not create. */
  pool: PgPool<C>;
  /** Schema of the inbox tables. Default: unqualified names (the connection's search_path). */
  schema?: string;
  logger?: Logger;
  /** Most transactions a consumer may run at once (its `concurrency` is capped by it). Default 10, the pool size. */
  maxConcurrentTransactions?: number;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * PostgreSQL store: one pooled client per transaction under READ COMMITTED. A concurrent insert
 * of the same key waits for the other transaction, then sees its row (duplicate/conflict) or
 * inserts (it rolled back): the primary key is the backstop, never a prior SELECT.
 */
export class PostgresStore<C extends PgClient = PgClient> implements Store<C>, OutboxRelayStore {
  readonly dialect = "postgres";
  readonly maxConcurrentTransactions: number;
  private readonly pool: PgPool<C>;
  private readonly ownsPool: boolean;
  private readonly prefix: string;
  private readonly logger: Logger;
  private readonly sql: ReturnType<typeof statements>;
  /** Fired after a commit that wrote outbox rows: in-process relays publish at once. */
  readonly outboxSignal = new OutboxSignal();
  private readonly outboxSql: PostgresOutbox<C>;
  /** Stale fence and replay grants, checked inside the claim (S13). */
  private readonly guards: PostgresClaimGuards;

  constructor(options: PostgresStoreOptions<C> & { ownsPool?: boolean }) {
    if (!options.pool) throw new InboxConfigError("PostgresStore needs a pool");
    this.pool = options.pool;
    this.ownsPool = options.ownsPool ?? false;
    this.prefix = options.schema ? `${quoteIdent(options.schema)}.` : "";
    this.logger = options.logger ?? silentLogger;
    this.maxConcurrentTransactions = options.maxConcurrentTransactions ?? 10;
    this.sql = statements(this.prefix, options.schema ?? "");
    this.outboxSql = new PostgresOutbox(this.pool, this.prefix, statementTag(options.schema ?? ""), options.schema ?? null);
    this.guards = new PostgresClaimGuards(this.prefix, statementTag(options.schema ?? ""));
  }

  /** Creates a pool from a connection string (loads `pg` on demand) and a store that owns it. */
  static async connect(
    connectionString: string,
    options: Omit<PostgresStoreOptions<PgClient>, "pool"> & { poolSize?: number } = {},
  ): Promise<PostgresStore> {
    const pg = await loadDriver<{ Pool: new (config: object) => PgPool }>("pg", "the PostgreSQL store");
    const pool = new pg.Pool({ connectionString, max: options.poolSize ?? 10 });
    const logger = options.logger ?? silentLogger;
    // An idle client whose session is terminated emits 'error' on the pool; unhandled, it
    // would crash the process. The pool discards that client by itself.
    pool.on("error", (error) => logger.warn("idle PostgreSQL client lost", { error: error.message }));
    return new PostgresStore({ ...options, pool, ownsPool: true });
  }

  async migrate(): Promise<void> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query("BEGIN");
      // One migrator at a time across processes; the lock ends with the transaction.
      await client.query("SELECT pg_advisory_xact_lock(hashtext('rabbit_inbox_migrate'))");
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.prefix}rabbit_inbox_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      const done = await client.query(`SELECT version FROM ${this.prefix}rabbit_inbox_migrations`);
      const applied = new Set(done.rows.map((r) => Number(r.version)));
      for (const m of postgresMigrations) {
        if (applied.has(m.version)) continue;
        await client.query(m.sql.replaceAll("{schema}", this.prefix));
        await client.query(`INSERT INTO ${this.prefix}rabbit_inbox_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
        this.logger.info("applied migration", { dialect: this.dialect, version: m.version, migration: m.name });
      }
      await client.query("COMMIT");
    } catch (error) {
      broken = isPostgresConnectionLoss(error);
      if (!broken) await client.query("ROLLBACK").catch(() => { broken = true; });
      throw classifyPostgresError(error);
    } finally {
      client.release(broken);
    }
  }

  async transaction<T>(work: (tx: StoreTransaction<C>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    let client: C;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw classifyPostgresError(error);
    }
    let broken = false;
    let committing = false;
    // pg-pool removes its error listener from a checked-out client: a session terminated while
    // no query runs (between statements, in a hook) would be an uncaught 'error' event.
    const onError = (error: Error) => {
      broken = true;
      this.logger.warn("PostgreSQL session lost during a transaction", { error: error.message });
    };
    client.on("error", onError);
    const outbox = { written: false };
    try {
      await client.query(this.sql.begin);
      const result = await work(this.transactionFor(client, outbox));
      if (beforeCommit) await beforeCommit();
      committing = true;
      const committed = await client.query(this.sql.commit);
      // PostgreSQL answers COMMIT of an aborted transaction (a handler caught an SQL error and
      // carried on) with ROLLBACK, not an error: nothing was written, so this must not ack.
      if ((committed as { command?: string }).command === "ROLLBACK") {
        committing = false;
        throw new TransientStoreError("the transaction was aborted by an earlier failed statement (did the handler catch an SQL error?); nothing was committed");
      }
      if (outbox.written) this.outboxSignal.notify();
      return result;
    } catch (error) {
      broken ||= isPostgresConnectionLoss(error);
      if (!broken && !committing) {
        await client.query(this.sql.rollback).catch(() => { broken = true; });
      }
      throw classifyPostgresError(error, committing);
    } finally {
      client.removeListener("error", onError);
      // A client whose session broke is destroyed, never returned to the pool.
      client.release(broken);
    }
  }

  private transactionFor(client: C, outbox: { written: boolean }): StoreTransaction<C> {
    return {
      handle: client,
      claim: (handler, claims) => this.claim(client, handler, claims),
      quarantine: (records) => this.quarantine(client, records),
      writeOutbox: async (records) => {
        if ((await this.outboxSql.write(client, records)) > 0) outbox.written = true;
      },
    };
  }

  private async claim(client: C, handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]> {
    const tenants = claims.map((c) => c.key.tenant);
    const ids = claims.map((c) => c.key.eventId);
    const inserted = await client.query({
      name: this.sql.claimName, text: this.sql.claim,
      values: [handler, tenants, ids, claims.map((c) => c.fingerprint)],
    });
    const allInserted = inserted.rows.length === claims.length;
    const fenced = claims.some((c) => c.eventTime !== undefined);
    if (allInserted && !fenced) return claims.map(() => ({ status: "claimed" }));
    const claimed = allInserted ? null : new Set(inserted.rows.map((r) => JSON.stringify([r.tenant, r.event_id])));
    const isInserted = claims.map((c) => claimed === null || claimed.has(JSON.stringify([c.key.tenant, c.key.eventId])));
    let results: ClaimResult[] = claims.map(() => ({ status: "claimed" }));
    if (!allInserted) {
      // A new statement, so READ COMMITTED sees rows committed by the transactions we waited for.
      const existing = await client.query({ name: this.sql.existingName, text: this.sql.existing, values: [handler, tenants, ids] });
      const stored = new Map(existing.rows.map((r) => [JSON.stringify([r.tenant, r.event_id]), String(r.fingerprint)]));
      results = claims.map((c, i) => {
        if (isInserted[i]) return { status: "claimed" };
        const fingerprint = stored.get(JSON.stringify([c.key.tenant, c.key.eventId]));
        // Not inserted and not visible: only possible if the row was purged in between; retry.
        if (fingerprint === undefined) throw Object.assign(new Error("inbox row vanished during claim"), { code: "40001" });
        return { status: "exists", fingerprint };
      });
    }
    return this.guards.apply(client, handler, claims, results, isInserted);
  }

  private async quarantine(client: C, records: readonly QuarantineRecord[]): Promise<void> {
    for (const r of records) {
      await client.query({
        name: this.sql.quarantineName, text: this.sql.quarantine,
        values: [
          r.handler, quarantineDedupKey(r), r.key?.tenant ?? null, r.key?.eventId ?? null, r.reason, r.detail,
          r.fingerprint, r.storedFingerprint, r.body, r.bodyTruncated, r.bodySha256, r.properties, r.queue,
          r.eventTime ?? null,
        ],
      });
    }
  }

  async listQuarantine(options: { handler?: string; limit?: number } = {}): Promise<QuarantineEntry[]> {
    const { rows } = await this.query(
      `SELECT * FROM ${this.prefix}rabbit_inbox_quarantine WHERE ($1::text IS NULL OR handler = $1) ORDER BY id DESC LIMIT $2`,
      [options.handler ?? null, options.limit ?? 1000],
    );
    return rows.map((r) => ({
      id: Number(r.id), handler: String(r.handler),
      tenant: (r.tenant as string | null) ?? null, eventId: (r.event_id as string | null) ?? null,
      reason: String(r.reason), detail: String(r.detail),
      fingerprint: (r.fingerprint as string | null) ?? null, storedFingerprint: (r.stored_fingerprint as string | null) ?? null,
      occurrences: Number(r.occurrences), body: r.body as Buffer, bodyTruncated: Boolean(r.body_truncated),
      firstSeen: r.first_seen as Date, lastSeen: r.last_seen as Date,
    }));
  }

  /** Retention, quarantine decisions and schema status, on this store's pool (the `rabbit-inbox` command uses it). */
  operations(): PostgresInboxOperations {
    return new PostgresInboxOperations(this.pool, this.prefix, this.logger);
  }

  async countInbox(handler: string, key?: EventKey): Promise<number> {
    const { rows } = await this.query(
      `SELECT count(*)::int AS n FROM ${this.prefix}rabbit_inbox_dedup WHERE handler = $1 AND ($2::text IS NULL OR (tenant = $2 AND event_id = $3))`,
      [handler, key?.tenant ?? null, key?.eventId ?? null],
    );
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * The outbox without an incoming message: `store.outbox.transaction(async (client, publish) => ...)`
   * writes business rows and outgoing messages in one transaction (S14).
   */
  get outbox(): Outbox<C> {
    return new Outbox(this);
  }

  async resendOutbox(handler: string, keys: readonly EventKey[]): Promise<number> {
    const due = await this.outboxSql.resend(handler, keys);
    if (due > 0) this.outboxSignal.notify();
    return due;
  }

  claimOutbox(options: { limit: number }): Promise<OutboxClaim | null> {
    return this.outboxSql.claim(options.limit);
  }

  cleanupOutbox(sentBefore: Date, limit: number): Promise<number> {
    return this.outboxSql.cleanup(sentBefore, limit);
  }

  /** LISTEN on a dedicated pool client (it stays checked out until the subscription closes). */
  listenOutbox(onWake: () => void, onLost: (error: Error) => void): Promise<OutboxSubscription> {
    return this.outboxSql.listen(onWake, onLost);
  }

  private async query(text: string, values: unknown[]): Promise<PgQueryResult> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      return await client.query(text, values);
    } catch (error) {
      broken = isPostgresConnectionLoss(error);
      throw classifyPostgresError(error);
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }
}

/** Prepared-statement names must be unique per text on a connection; the schema is part of the text. */
function statementTag(schema: string): string {
  return schema ? `_${Buffer.from(schema).toString("hex").slice(0, 40)}` : "";
}

function statements(prefix: string, schema: string) {
  const tag = statementTag(schema);
  return {
    begin: "BEGIN",
    commit: "COMMIT",
    rollback: "ROLLBACK",
    claimName: `ri_claim${tag}`,
    claim: `INSERT INTO ${prefix}rabbit_inbox_dedup (tenant, handler, event_id, fingerprint)
      SELECT t.tenant, $1, t.event_id, t.fingerprint
      FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS t(tenant, event_id, fingerprint, ord)
      ORDER BY t.ord
      ON CONFLICT DO NOTHING
      RETURNING tenant, event_id`,
    existingName: `ri_existing${tag}`,
    existing: `SELECT d.tenant, d.event_id, d.fingerprint FROM ${prefix}rabbit_inbox_dedup d
      JOIN unnest($2::text[], $3::text[]) AS t(tenant, event_id) ON d.tenant = t.tenant AND d.event_id = t.event_id
      WHERE d.handler = $1`,
    quarantineName: `ri_quarantine${tag}`,
    quarantine: `INSERT INTO ${prefix}rabbit_inbox_quarantine
      (handler, dedup_key, tenant, event_id, reason, detail, fingerprint, stored_fingerprint, body, body_truncated, body_sha256, properties, queue, event_time)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
      ON CONFLICT (handler, dedup_key) DO UPDATE SET
        occurrences = ${prefix}rabbit_inbox_quarantine.occurrences + 1, last_seen = now(),
        reason = EXCLUDED.reason, detail = EXCLUDED.detail,
        event_time = COALESCE(${prefix}rabbit_inbox_quarantine.event_time, EXCLUDED.event_time),
        status = 'held'`,
  };
}
