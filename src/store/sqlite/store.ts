import { InboxConfigError } from "../../core/errors.js";
import type { EventKey } from "../../core/event.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import {
  type ClaimResult, type InboxClaim, type QuarantineEntry, type QuarantineRecord, type Store, type StoreTransaction,
  quarantineDedupKey,
} from "../../core/store.js";
import { Outbox } from "../../outbox/outbox.js";
import { OutboxSignal } from "../../outbox/outbox-signal.js";
import type { OutboxClaim, OutboxRelayStore } from "../../outbox/outbox-store.js";
import { loadDriver } from "../load-driver.js";
import { classifySqliteError } from "./errors.js";
import { sqliteMigrations } from "./migrations.js";
import { SqliteOutbox } from "./outbox-relay.js";
import { SqliteClaimGuards } from "./claim.js";
import { SqliteInboxOperations } from "./operations.js";

/** The slice of better-sqlite3 the store uses. */
export interface SqliteStatement {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}
export interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): unknown;
  pragma(sql: string): unknown;
  close(): unknown;
  readonly inTransaction: boolean;
}

export interface SqliteStoreOptions<D extends SqliteDatabase> {
  database: D;
  logger?: Logger;
}

export interface SqliteOpenOptions {
  logger?: Logger;
  /** How long a writer waits for another process's write lock, in ms. Default 5000. */
  busyTimeoutMs?: number;
  /**
   * `FULL` (default) makes every commit durable across power loss. `NORMAL` in WAL mode is
   * faster but can lose the last commits on power loss (never corrupts): then a redelivered
   * event may apply again, which breaks the once-per-event promise for those commits.
   */
  synchronous?: "FULL" | "NORMAL";
}

/**
 * SQLite store (better-sqlite3): one writer. Transactions are serialized in-process and use
 * BEGIN IMMEDIATE, so several processes on one file queue on the write lock instead of failing
 * at commit. For demos and small deployments.
 */
export class SqliteStore<D extends SqliteDatabase = SqliteDatabase> implements Store<D>, OutboxRelayStore {
  readonly dialect = "sqlite";
  readonly maxConcurrentTransactions = 1;
  private readonly db: D;
  private readonly logger: Logger;
  private readonly ownsDatabase: boolean;
  private queue: Promise<unknown> = Promise.resolve();
  private stmts: ReturnType<SqliteStore["prepareStatements"]> | undefined;
  /** Fired after a commit that wrote outbox rows: in-process relays publish at once. */
  readonly outboxSignal = new OutboxSignal();
  private readonly outboxSql: SqliteOutbox;
  /** Stale fence and replay grants, checked inside the claim. */
  private readonly guards: SqliteClaimGuards;

  constructor(options: SqliteStoreOptions<D> & { ownsDatabase?: boolean }) {
    if (!options.database) throw new InboxConfigError("SqliteStore needs a database");
    this.db = options.database;
    this.logger = options.logger ?? silentLogger;
    this.ownsDatabase = options.ownsDatabase ?? false;
    this.outboxSql = new SqliteOutbox(this.db, (fn) => this.transaction(() => Promise.resolve(fn())));
    this.guards = new SqliteClaimGuards(this.db);
  }

  /** Opens (creating if needed) a database file in WAL mode; loads better-sqlite3 on demand. */
  static async open(filename: string, options: SqliteOpenOptions = {}): Promise<SqliteStore> {
    const Database = await loadDriver<new (filename: string, options?: object) => SqliteDatabase>("better-sqlite3", "the SQLite store");
    const db = new Database(filename, { timeout: options.busyTimeoutMs ?? 5000 });
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${options.synchronous ?? "FULL"}`);
    db.pragma("foreign_keys = ON");
    return new SqliteStore({ database: db, ...(options.logger ? { logger: options.logger } : {}), ownsDatabase: true });
  }

  get database(): D {
    return this.db;
  }

  private prepareStatements() {
    return {
      begin: this.db.prepare("BEGIN IMMEDIATE"),
      commit: this.db.prepare("COMMIT"),
      claim: this.db.prepare(
        "INSERT INTO rabbit_inbox_dedup (tenant, handler, event_id, fingerprint, first_seen) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
      ),
      existing: this.db.prepare("SELECT fingerprint FROM rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?"),
      redelivery: this.db.prepare(`INSERT INTO rabbit_inbox_redelivery (tenant, handler, event_id, first_seen, last_seen) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (tenant, handler, event_id) DO UPDATE SET redeliveries = redeliveries + 1, last_seen = excluded.last_seen
        RETURNING redeliveries`),
      quarantine: this.db.prepare(`INSERT INTO rabbit_inbox_quarantine
        (handler, dedup_key, tenant, event_id, reason, detail, fingerprint, stored_fingerprint, body, body_truncated, body_sha256, properties, queue, first_seen, last_seen, event_time)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (handler, dedup_key) DO UPDATE SET
          occurrences = occurrences + 1, last_seen = excluded.last_seen, reason = excluded.reason, detail = excluded.detail,
          event_time = coalesce(event_time, excluded.event_time), status = 'held'`),
    };
  }

  private get statements() {
    this.stmts ??= this.prepareStatements();
    return this.stmts;
  }

  /** Runs `fn` after every earlier transaction of this store has finished. */
  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  migrate(): Promise<void> {
    return this.serialize(async () => {
      try {
        this.db.exec("BEGIN IMMEDIATE");
        this.db.exec(`CREATE TABLE IF NOT EXISTS rabbit_inbox_migrations (
          version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
        const applied = new Set((this.db.prepare("SELECT version FROM rabbit_inbox_migrations").all() as Array<{ version: number }>).map((r) => r.version));
        for (const m of sqliteMigrations) {
          if (applied.has(m.version)) continue;
          this.db.exec(m.sql.replaceAll("{schema}", ""));
          this.db.prepare("INSERT INTO rabbit_inbox_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, Date.now());
          this.logger.info("applied migration", { dialect: this.dialect, version: m.version, migration: m.name });
        }
        this.db.exec("COMMIT");
        await Promise.resolve();
      } catch (error) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw classifySqliteError(error);
      }
    });
  }

  transaction<T>(work: (tx: StoreTransaction<D>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    return this.serialize(async () => {
      const outbox = { written: false };
      try {
        this.statements.begin.run();
        const result = await work(this.transactionFor(outbox));
        if (beforeCommit) await beforeCommit();
        this.statements.commit.run();
        if (outbox.written) this.outboxSignal.notify();
        return result;
      } catch (error) {
        if (this.db.inTransaction) {
          try {
            this.db.exec("ROLLBACK");
          } catch (rollbackError) {
            this.logger.error("SQLite rollback failed", { error: String(rollbackError) });
          }
        }
        throw classifySqliteError(error);
      }
    });
  }

  private transactionFor(outbox: { written: boolean }): StoreTransaction<D> {
    return {
      handle: this.db,
      claim: (handler, claims) => Promise.resolve(this.claim(handler, claims)),
      quarantine: (records) => Promise.resolve(this.quarantine(records)),
      countRedelivery: (handler, key) => {
        const now = Date.now();
        const row = this.statements.redelivery.get(key.tenant, handler, key.eventId, now, now) as { redeliveries: number };
        return Promise.resolve(Number(row.redeliveries));
      },
      writeOutbox: (records) => {
        if (this.outboxSql.writeInTransaction(records) > 0) outbox.written = true;
        return Promise.resolve();
      },
    };
  }

  private claim(handler: string, claims: readonly InboxClaim[]): ClaimResult[] {
    const now = Date.now();
    const { claim, existing } = this.statements;
    const fence = this.guards.fence(handler);
    return claims.map((c): ClaimResult => {
      if (claim.run(c.key.tenant, handler, c.key.eventId, c.fingerprint, now).changes === 1) return fence(c);
      const row = existing.get(c.key.tenant, handler, c.key.eventId) as { fingerprint: string } | undefined;
      if (!row) throw new Error("inbox row neither inserted nor found");
      if (row.fingerprint !== c.fingerprint && this.guards.acceptNewVersion(handler, c, row.fingerprint)) return { status: "claimed", replaced: row.fingerprint };
      return { status: "exists", fingerprint: row.fingerprint };
    });
  }

  private quarantine(records: readonly QuarantineRecord[]): void {
    const now = Date.now();
    for (const r of records) {
      this.statements.quarantine.run(
        r.handler, quarantineDedupKey(r), r.key?.tenant ?? null, r.key?.eventId ?? null, r.reason, r.detail,
        r.fingerprint, r.storedFingerprint, r.body, r.bodyTruncated ? 1 : 0, r.bodySha256, r.properties, r.queue, now, now,
        r.eventTime ? r.eventTime.getTime() : null,
      );
    }
  }

  /** Retention, quarantine decisions and schema status, serialized with this store's transactions. */
  operations(): SqliteInboxOperations {
    return new SqliteInboxOperations(this.db, (fn) => this.serialize(fn));
  }

  listQuarantine(options: { handler?: string; limit?: number } = {}): Promise<QuarantineEntry[]> {
    const rows = this.db
      .prepare("SELECT * FROM rabbit_inbox_quarantine WHERE (? IS NULL OR handler = ?) ORDER BY id DESC LIMIT ?")
      .all(options.handler ?? null, options.handler ?? null, options.limit ?? 1000) as Array<Record<string, unknown>>;
    return Promise.resolve(rows.map((r) => ({
      id: Number(r.id), handler: String(r.handler),
      tenant: (r.tenant as string | null) ?? null, eventId: (r.event_id as string | null) ?? null,
      reason: String(r.reason), detail: String(r.detail),
      fingerprint: (r.fingerprint as string | null) ?? null, storedFingerprint: (r.stored_fingerprint as string | null) ?? null,
      occurrences: Number(r.occurrences), body: r.body as Buffer, bodyTruncated: Boolean(r.body_truncated),
      firstSeen: new Date(Number(r.first_seen)), lastSeen: new Date(Number(r.last_seen)),
    })));
  }

  /**
   * The outbox without an incoming message: `store.outbox.transaction(async (db, publish) => ...)`
   * writes business rows and outgoing messages in one transaction.
   */
  get outbox(): Outbox<D> {
    return new Outbox(this);
  }

  async resendOutbox(handler: string, keys: readonly EventKey[]): Promise<number> {
    const due = await this.outboxSql.resend(handler, keys);
    if (due > 0) this.outboxSignal.notify();
    return due;
  }

  claimOutbox(options: { limit: number; relayId: string; leaseMs: number }): Promise<OutboxClaim | null> {
    return this.outboxSql.claim(options.limit, options.relayId, options.leaseMs);
  }

  cleanupOutbox(sentBefore: Date, limit: number): Promise<number> {
    return this.outboxSql.cleanup(sentBefore, limit);
  }

  countInbox(handler: string, key?: EventKey): Promise<number> {
    const row = key
      ? this.db.prepare("SELECT count(*) AS n FROM rabbit_inbox_dedup WHERE handler = ? AND tenant = ? AND event_id = ?").get(handler, key.tenant, key.eventId)
      : this.db.prepare("SELECT count(*) AS n FROM rabbit_inbox_dedup WHERE handler = ?").get(handler);
    return Promise.resolve(Number((row as { n: number }).n));
  }

  async close(): Promise<void> {
    await this.queue;
    if (this.ownsDatabase) this.db.close();
  }
}
