import { createHash } from "node:crypto";
import { InboxConfigError, InvalidEventError, TransientStoreError, describeError } from "../../core/errors.js";
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
import { classifyMysqlError, isMysqlConnectionLoss, isMysqlContention } from "./classify-mysql-error.js";
import {
  MYSQL_MAX_FINGERPRINT_BYTES, MYSQL_MAX_HANDLER_BYTES, MYSQL_MAX_ID_BYTES, mysqlMigrations, mysqlSchemaObjectOf, splitMysqlStatements,
} from "./migrations.js";
import { MysqlClaimGuards } from "./mysql-claim-guards.js";
import { MysqlInboxOperations } from "./mysql-operations.js";
import { MysqlOutbox } from "./mysql-outbox.js";
import {
  type MysqlExec, acquire, chunked, giveBack, headerOf, nullableText, quoteIdent, rowsOf, textOf, utcDatetime, utf8,
} from "./mysql-sql.js";

/** A statement parameter, as the store and handlers pass them to mysql2. */
export type MysqlValue = string | number | bigint | boolean | Date | Buffer | Uint8Array | null;

/**
 * The slice of mysql2's promise API the store uses; a `mysql2/promise` Pool and its
 * PoolConnection fit it. `execute` (server-side prepared statements) carries every value the
 * store sends, so no value is ever escaped into SQL text (mysql2's escaping assumes backslash
 * escapes, which the NO_BACKSLASH_ESCAPES sql_mode turns off).
 */
export interface MysqlConnection {
  query(sql: string, values?: MysqlValue[]): Promise<[unknown, unknown]>;
  execute(sql: string, values?: MysqlValue[]): Promise<[unknown, unknown]>;
  release(): void;
  /** Closes the socket and removes the connection from its pool. */
  destroy(): void;
}
export interface MysqlPool<C extends MysqlConnection = MysqlConnection> {
  getConnection(): Promise<C>;
  end(): Promise<void>;
}
/** What mysql2 returns for INSERT/UPDATE/DELETE and statements without rows. */
export interface MysqlResultHeader {
  affectedRows: number;
  serverStatus?: number;
}

export type MysqlIsolationLevel = "READ COMMITTED" | "REPEATABLE READ" | "SERIALIZABLE";

export interface MysqlStoreOptions<C extends MysqlConnection> {
  /** A mysql2/promise pool. The store never ends a pool it did not create. */
  pool: MysqlPool<C>;
  /** Database holding the inbox tables. Default: the connection's current database. */
  database?: string;
  logger?: Logger;
  /** Most transactions a consumer may run at once (its `concurrency` is capped by it). Default 10, the pool size. */
  maxConcurrentTransactions?: number;
  /**
   * Isolation level of the inbox transactions, set with `SET TRANSACTION` before each one (one
   * more round trip). Default: none set, the session's level (REPEATABLE READ unless the server
   * or pool says otherwise). The inbox is correct under any of them; this only changes what
   * your handler's own reads see and how much InnoDB gap-locks.
   */
  isolationLevel?: MysqlIsolationLevel;
}

/** Options of MysqlStore.connect, on top of the store's. */
export interface MysqlConnectOptions extends Omit<MysqlStoreOptions<MysqlConnection>, "pool"> {
  /** Connections in the pool. Default 10. */
  poolSize?: number;
  /**
   * mysql2's `trace`: capture the caller's stack before every query, so that a failed query's
   * stack shows where it was sent from. Default false: the capture costs about 15 us of CPU per
   * statement (measured here; strict mode sends four per message), and the store's logs name
   * the handler and the event of a failure anyway. Errors keep their message and code either way.
   */
  traceQueries?: boolean;
}

/** SERVER_STATUS_IN_TRANS in the server's OK packet: a transaction is open on the session. */
const SERVER_STATUS_IN_TRANS = 0x0001;
/** The migration lock's name: server-wide, so it carries a hash of the database (names are at most 64 characters). */
const MIGRATION_LOCK = "CONCAT('rabbit_inbox_migrate_', LEFT(SHA2(COALESCE(?, DATABASE(), ''), 256), 32))";
const ISOLATION_LEVELS: ReadonlySet<string> = new Set(["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"]);

/** What one transaction learned about its session from the statements that ran on it. */
interface SessionState {
  /** Set when the server ended our transaction under the handler's feet. */
  ended: unknown;
}

/**
 * Rows per claim statement: powers of two up to 256 (a batch of 500 in 6 statements rather than
 * 10 of at most 64), so a connection still prepares few distinct texts.
 */
const CLAIM_CHUNKS = [256, 128, 64, 32, 16, 8, 4, 2, 1] as const;

/**
 * MySQL / MariaDB (InnoDB) store: one pooled connection per transaction.
 *
 * Claims: one multi-row `INSERT ... ON DUPLICATE KEY UPDATE seen_again = seen_again + 1` per
 * chunk, rows in the given (sorted) order so that concurrent batches lock keys in one order.
 * A key held by a concurrent uncommitted transaction waits for it, then inserts (it rolled
 * back) or takes the duplicate branch (it committed): the primary key decides, never a prior
 * SELECT. The affected-row count (1 per insert, 2 per duplicate) says whether any key was a
 * duplicate; only then a second statement reads which, and the stored fingerprints.
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
 * Failures: any error issues ROLLBACK (1205 rolled back only the statement) and is classified
 * by classifyMysqlError; a connection whose error is `fatal` is destroyed, never released.
 * Because a deadlock ends the transaction on the server while the session goes on in autocommit
 * mode, the handle given to handlers refuses further statements after one, and the store
 * refuses to COMMIT if the transaction ended early (a swallowed deadlock, a COMMIT or DDL in the
 * handler): otherwise the rest of the handler's writes would autocommit without the dedup row.
 *
 * Like the PostgreSQL store, it also applies the stale fence and the operator's replay grants
 * inside the claim (MysqlClaimGuards), has a transactional outbox and a relay side
 * (MysqlOutbox: `FOR UPDATE SKIP LOCKED` claims, polling only), and offers `operations()` for
 * retention and the `rabbit-inbox` command (MysqlInboxOperations).
 */
export class MysqlStore<C extends MysqlConnection = MysqlConnection> implements Store<C>, OutboxRelayStore {
  readonly dialect = "mysql";
  readonly maxConcurrentTransactions: number;
  private readonly pool: MysqlPool<C>;
  private readonly ownsPool: boolean;
  private readonly prefix: string;
  private readonly database: string | undefined;
  private readonly logger: Logger;
  private readonly isolationLevel: MysqlIsolationLevel | undefined;
  private durabilityChecked = false;
  /** Fired after a commit that wrote outbox rows: in-process relays publish at once. */
  readonly outboxSignal = new OutboxSignal();
  private readonly outboxSql: MysqlOutbox<C>;
  /** Stale fence and replay grants, checked inside the claim. */
  private readonly guards: MysqlClaimGuards;

  constructor(options: MysqlStoreOptions<C> & { ownsPool?: boolean }) {
    if (!options.pool) throw new InboxConfigError("MysqlStore needs a pool");
    if (options.isolationLevel !== undefined && !ISOLATION_LEVELS.has(options.isolationLevel)) {
      throw new InboxConfigError(`MysqlStore isolationLevel must be one of ${[...ISOLATION_LEVELS].join(", ")}`);
    }
    this.pool = options.pool;
    this.ownsPool = options.ownsPool ?? false;
    this.database = options.database;
    this.prefix = options.database ? `${quoteIdent(options.database)}.` : "";
    this.logger = options.logger ?? silentLogger;
    this.maxConcurrentTransactions = options.maxConcurrentTransactions ?? 10;
    this.isolationLevel = options.isolationLevel;
    this.outboxSql = new MysqlOutbox(this.pool, this.prefix);
    this.guards = new MysqlClaimGuards(this.prefix);
  }

  /** Creates a pool from a `mysql://` URL (loads `mysql2` on demand) and a store that owns it. */
  static async connect(url: string, options: MysqlConnectOptions = {}): Promise<MysqlStore> {
    const mysql = await loadDriver<{ createPool(config: object): MysqlPool & PoolEvents }>("mysql2/promise", "the MySQL store");
    const pool = mysql.createPool({ uri: url, connectionLimit: options.poolSize ?? 10, trace: options.traceQueries ?? false });
    const logger = options.logger ?? silentLogger;
    // mysql2 removes a pooled connection from the pool on its first 'error' event, with a
    // once-listener; a second 'error' on the same dead connection, with no listener left, would
    // crash the process.
    pool.on("connection", (connection) => {
      connection.on("error", (error: Error) => logger.warn("MySQL connection lost", { error: error.message }));
    });
    const { poolSize: _poolSize, traceQueries: _traceQueries, ...storeOptions } = options;
    return new MysqlStore({ ...storeOptions, pool, ownsPool: true });
  }

  async migrate(): Promise<void> {
    const connection = await this.acquire();
    let broken = false;
    let locked = false;
    try {
      await this.checkDurability(connection);
      // DDL commits implicitly, so a transaction cannot serialize migrators: a named lock held
      // by this session does. GET_LOCK names are server-wide (at most 64 characters): the
      // database's hash keeps two databases on one server from waiting for each other.
      const [lock] = await connection.execute(`SELECT GET_LOCK(${MIGRATION_LOCK}, 60) AS locked`, [this.database ?? null]);
      locked = Number((lock as Array<{ locked: unknown }>)[0]?.locked) === 1;
      if (!locked) throw new TransientStoreError("another process has been migrating the inbox tables for 60 s");
      await connection.query(`CREATE TABLE IF NOT EXISTS ${this.prefix}rabbit_inbox_migrations (
        version INT NOT NULL PRIMARY KEY,
        name VARCHAR(255) NOT NULL,
        applied_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
      const applied = new Set(rowsOf(await connection.query(`SELECT version FROM ${this.prefix}rabbit_inbox_migrations`)).map((r) => Number(r.version)));
      for (const m of mysqlMigrations) {
        if (applied.has(m.version)) continue;
        for (const statement of splitMysqlStatements(m.sql)) {
          // A column or index an earlier, interrupted run of this migration already added.
          if (await this.schemaHas(connection, statement)) continue;
          await connection.query(statement.replaceAll("{schema}", this.prefix));
        }
        await connection.execute(`INSERT INTO ${this.prefix}rabbit_inbox_migrations (version, name) VALUES (?, ?)`, [m.version, m.name]);
        this.logger.info("applied migration", { dialect: this.dialect, version: m.version, name: m.name });
      }
    } catch (error) {
      broken = isMysqlConnectionLoss(error);
      throw classifyMysqlError(error);
    } finally {
      if (locked && !broken) {
        await connection.execute(`DO RELEASE_LOCK(${MIGRATION_LOCK})`, [this.database ?? null]).catch(() => { broken = true; });
      }
      this.giveBack(connection, broken);
    }
  }

  /** True when the statement adds a column or an index that information_schema already shows. */
  private async schemaHas(connection: C, statement: string): Promise<boolean> {
    const object = mysqlSchemaObjectOf(statement);
    if (!object) return false;
    const [found] = rowsOf(await connection.execute(
      object.kind === "column"
        ? "SELECT COUNT(*) AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = ?"
        : "SELECT COUNT(*) AS n FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND INDEX_NAME = ?",
      [this.database ?? null, object.table, object.name],
    ));
    return Number(found?.n ?? 0) > 0;
  }

  /**
   * Warns when commits are not flushed to disk: with innodb_flush_log_at_trx_commit 0 or 2 a
   * crash of the server (2: of the machine) can lose the last second of commits, and events
   * whose commit was lost but whose delivery was acked are lost for good.
   */
  private async checkDurability(connection: C): Promise<void> {
    this.durabilityChecked = true;
    try {
      const rows = rowsOf(await connection.query("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS flush"));
      const flush = Number(rows[0]?.flush);
      if (flush !== 1) {
        this.logger.warn("innodb_flush_log_at_trx_commit is not 1: a server or machine crash can lose acknowledged commits", {
          dialect: this.dialect, innodb_flush_log_at_trx_commit: rows[0]?.flush,
        });
      }
    } catch (error) {
      if (isMysqlConnectionLoss(error)) throw error;
      this.logger.debug("could not read innodb_flush_log_at_trx_commit", { error: describeError(error) });
    }
  }

  async transaction<T>(work: (tx: StoreTransaction<C>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    const connection = await this.acquire();
    const session: SessionState = { ended: undefined };
    const outbox = { written: false };
    let broken = false;
    let committing = false;
    try {
      if (!this.durabilityChecked) await this.checkDurability(connection);
      if (this.isolationLevel) await connection.query(`SET TRANSACTION ISOLATION LEVEL ${this.isolationLevel}`);
      await connection.query("START TRANSACTION");
      const result = await work(this.transactionFor(connection, session, outbox));
      if (beforeCommit) await beforeCommit();
      if (session.ended !== undefined) throw classifyMysqlError(session.ended);
      committing = true;
      await connection.query("COMMIT");
      if (outbox.written) this.outboxSignal.notify();
      return result;
    } catch (error) {
      broken = isMysqlConnectionLoss(error) || isMysqlConnectionLoss(session.ended);
      if (!broken) {
        // Always: a lock wait timeout left the transaction open, and a failed COMMIT may have too.
        await connection.query("ROLLBACK").catch((rollbackError: unknown) => {
          broken = true;
          this.logger.warn("MySQL rollback failed; the connection is discarded", { error: describeError(rollbackError) });
        });
      }
      throw classifyMysqlError(error, committing);
    } finally {
      this.giveBack(connection, broken);
    }
  }

  private transactionFor(connection: C, session: SessionState, outbox: { written: boolean }): StoreTransaction<C> {
    return {
      handle: guardSession(connection, session),
      claim: (handler, claims) => this.claim(connection, session, handler, claims),
      quarantine: (records) => this.quarantine(connection, session, records),
      countRedelivery: (handler, key) => this.countRedelivery(connection, session, handler, key),
      writeOutbox: async (records) => {
        if (await this.outboxSql.write((sql, values) => run(connection, session, sql, values), records)) outbox.written = true;
      },
    };
  }

  private async countRedelivery(connection: C, session: SessionState, handler: string, key: EventKey): Promise<number> {
    const values = [utf8(key.tenant), utf8(handler), utf8(key.eventId)];
    if (values[0]!.length > MYSQL_MAX_ID_BYTES || values[2]!.length > MYSQL_MAX_ID_BYTES) {
      throw new InvalidEventError(`tenant or event id longer than ${MYSQL_MAX_ID_BYTES} UTF-8 bytes, the MySQL store's limit`);
    }
    await run(connection, session,
      `INSERT INTO ${this.prefix}rabbit_inbox_redelivery (tenant, handler, event_id) VALUES (?, ?, ?)
       ON DUPLICATE KEY UPDATE redeliveries = redeliveries + 1, last_seen = UTC_TIMESTAMP(6)`, values);
    // The row is locked by this transaction: the count read is the one just written.
    const [rows] = await run(connection, session,
      `SELECT redeliveries FROM ${this.prefix}rabbit_inbox_redelivery WHERE tenant = ? AND handler = ? AND event_id = ?`, values);
    return Number((rows as Array<{ redeliveries: unknown }>)[0]?.redeliveries);
  }

  private async claim(connection: C, session: SessionState, handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]> {
    const handlerBytes = utf8(handler);
    if (handlerBytes.length > MYSQL_MAX_HANDLER_BYTES) {
      throw new InboxConfigError(`handler name is ${handlerBytes.length} UTF-8 bytes; the MySQL store allows ${MYSQL_MAX_HANDLER_BYTES}`);
    }
    const rows = claims.map((c) => {
      const tenant = utf8(c.key.tenant);
      const eventId = utf8(c.key.eventId);
      const fingerprint = utf8(c.fingerprint);
      // Checked here rather than left to the column: without strict sql_mode MySQL would cut an
      // over-long id silently, and two distinct events would share a key.
      if (tenant.length > MYSQL_MAX_ID_BYTES || eventId.length > MYSQL_MAX_ID_BYTES) {
        throw new InvalidEventError(`tenant or event id longer than ${MYSQL_MAX_ID_BYTES} UTF-8 bytes, the MySQL store's limit`);
      }
      if (fingerprint.length > MYSQL_MAX_FINGERPRINT_BYTES) {
        throw new InboxConfigError(`payload fingerprint longer than ${MYSQL_MAX_FINGERPRINT_BYTES} UTF-8 bytes`);
      }
      return { tenant, eventId, fingerprint };
    });
    // The duplicate branch would take our own earlier row in the statement for someone else's.
    if (new Set(rows.map((r) => keyOf(r.tenant, r.eventId))).size !== rows.length) {
      throw new InboxConfigError("claim keys must be distinct within one call");
    }
    const results: ClaimResult[] = [];
    for (const chunk of chunked(rows, CLAIM_CHUNKS)) results.push(...(await this.claimChunk(connection, session, handlerBytes, chunk)));
    const inserted = results.map((r) => r.status === "claimed");
    const exec: MysqlExec = (sql, values) => run(connection, session, sql, values);
    return this.guards.apply(exec, handler, claims, results, inserted);
  }

  private async claimChunk(
    connection: C, session: SessionState, handler: Buffer,
    rows: ReadonlyArray<{ tenant: Buffer; eventId: Buffer; fingerprint: Buffer }>,
  ): Promise<ClaimResult[]> {
    const values: MysqlValue[] = [];
    for (const r of rows) values.push(r.tenant, handler, r.eventId, r.fingerprint);
    const inserted = headerOf(await run(connection, session,
      `INSERT INTO ${this.prefix}rabbit_inbox_dedup (tenant, handler, event_id, fingerprint)
       VALUES ${rows.map(() => "(?, ?, ?, ?)").join(", ")}
       ON DUPLICATE KEY UPDATE seen_again = seen_again + 1`, values));
    if (inserted.affectedRows === rows.length) return rows.map(() => ({ status: "claimed" }));

    const keyValues: MysqlValue[] = [handler];
    for (const r of rows) keyValues.push(r.tenant, r.eventId);
    const found = rowsOf(await run(connection, session,
      `SELECT tenant, event_id, fingerprint, seen_again FROM ${this.prefix}rabbit_inbox_dedup
       WHERE handler = ? AND (${rows.map(() => "(tenant = ? AND event_id = ?)").join(" OR ")})
       FOR UPDATE`, keyValues));
    const byKey = new Map(found.map((f) => [keyOf(f.tenant as Buffer, f.event_id as Buffer), f]));
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

  private async quarantine(connection: C, session: SessionState, records: readonly QuarantineRecord[]): Promise<void> {
    // Sorted by their unique key, so two consumers quarantining the same messages lock them in one order.
    const rows = records
      .map((r) => ({ r, dedupKey: quarantineDedupKey(r) }))
      .map((x) => ({ ...x, hash: createHash("sha256").update(x.dedupKey).digest() }))
      .sort((a, b) => (a.r.handler < b.r.handler ? -1 : a.r.handler > b.r.handler ? 1 : Buffer.compare(a.hash, b.hash)));
    for (const { r, dedupKey, hash } of rows) {
      // The new value is passed again rather than read with VALUES(event_time), deprecated by MySQL 8.0.20+.
      const eventTime = r.eventTime ? utcDatetime(r.eventTime) : null;
      await run(connection, session,
        `INSERT INTO ${this.prefix}rabbit_inbox_quarantine
          (handler, dedup_key, dedup_key_sha256, tenant, event_id, reason, detail, fingerprint, stored_fingerprint,
           body, body_truncated, body_sha256, properties, queue, event_time)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON DUPLICATE KEY UPDATE occurrences = occurrences + 1, last_seen = UTC_TIMESTAMP(6), reason = ?, detail = ?,
           event_time = COALESCE(event_time, ?), status = 'held'`,
        [
          r.handler, dedupKey, hash, r.key?.tenant ?? null, r.key?.eventId ?? null, r.reason, r.detail,
          r.fingerprint, r.storedFingerprint, r.body, r.bodyTruncated ? 1 : 0, r.bodySha256, r.properties, r.queue, eventTime,
          r.reason, r.detail, eventTime,
        ]);
    }
  }

  async listQuarantine(options: { handler?: string; limit?: number } = {}): Promise<QuarantineEntry[]> {
    // LIMIT is inlined: a prepared LIMIT ? rejects mysql2's numeric parameters on MySQL 8.0.22+.
    const limit = Math.max(0, Math.min(Math.trunc(options.limit ?? 1000), 1_000_000));
    const where = options.handler === undefined ? "" : "WHERE handler = ?";
    const rows = await this.read(
      `SELECT id, handler, tenant, event_id, reason, detail, fingerprint, stored_fingerprint, occurrences, body, body_truncated,
         TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', first_seen) AS first_seen_us,
         TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', last_seen) AS last_seen_us
       FROM ${this.prefix}rabbit_inbox_quarantine ${where} ORDER BY id DESC LIMIT ${limit}`,
      options.handler === undefined ? [] : [options.handler],
    );
    return rows.map((r) => ({
      id: Number(r.id), handler: textOf(r.handler),
      tenant: nullableText(r.tenant), eventId: nullableText(r.event_id),
      reason: textOf(r.reason), detail: textOf(r.detail),
      fingerprint: nullableText(r.fingerprint), storedFingerprint: nullableText(r.stored_fingerprint),
      occurrences: Number(r.occurrences), body: Buffer.isBuffer(r.body) ? r.body : Buffer.from(textOf(r.body)),
      bodyTruncated: Boolean(Number(r.body_truncated)),
      firstSeen: new Date(Number(r.first_seen_us) / 1000), lastSeen: new Date(Number(r.last_seen_us) / 1000),
    }));
  }

  async countInbox(handler: string, key?: EventKey): Promise<number> {
    const rows = key
      ? await this.read(
        `SELECT COUNT(*) AS n FROM ${this.prefix}rabbit_inbox_dedup WHERE tenant = ? AND handler = ? AND event_id = ?`,
        [utf8(key.tenant), utf8(handler), utf8(key.eventId)],
      )
      : await this.read(`SELECT COUNT(*) AS n FROM ${this.prefix}rabbit_inbox_dedup WHERE handler = ?`, [utf8(handler)]);
    return Number(rows[0]?.n ?? 0);
  }

  /** Retention, quarantine decisions and schema status, on this store's pool (the `rabbit-inbox` command uses it). */
  operations(): MysqlInboxOperations<C> {
    return new MysqlInboxOperations(this.pool, this.prefix);
  }

  /**
   * The outbox without an incoming message: `store.outbox.transaction(async (connection, publish) => ...)`
   * writes business rows and outgoing messages in one transaction.
   */
  get outbox(): Outbox<C> {
    return new Outbox(this);
  }

  async resendOutbox(handler: string, keys: readonly EventKey[]): Promise<number> {
    const due = await this.outboxSql.resend(handler, keys);
    if (due > 0) this.outboxSignal.notify();
    return due;
  }

  /** Rows held FOR UPDATE SKIP LOCKED in an open transaction until settled (no lease: `relayId` and `leaseMs` are unused). */
  claimOutbox(options: { limit: number }): Promise<OutboxClaim | null> {
    return this.outboxSql.claim(options.limit);
  }

  cleanupOutbox(sentBefore: Date, limit: number): Promise<number> {
    return this.outboxSql.cleanup(sentBefore, limit);
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }

  private acquire(): Promise<C> {
    return acquire(this.pool);
  }

  private giveBack(connection: C, broken: boolean): void {
    giveBack(connection, broken);
  }

  private async read(sql: string, values: MysqlValue[]): Promise<Array<Record<string, unknown>>> {
    const connection = await this.acquire();
    let broken = false;
    try {
      return rowsOf(await connection.execute(sql, values));
    } catch (error) {
      broken = isMysqlConnectionLoss(error);
      throw classifyMysqlError(error);
    } finally {
      this.giveBack(connection, broken);
    }
  }
}

/** mysql2's pool emits the raw connection it just opened. */
interface PoolEvents {
  on(event: "connection", listener: (connection: { on(event: "error", listener: (error: Error) => void): unknown }) => void): unknown;
}

function keyOf(tenant: Buffer, eventId: Buffer): string {
  return `${tenant.toString("hex")}:${eventId.toString("hex")}`;
}

/** True when an error means the server has ended (or will refuse) the rest of the transaction. */
function endsTransaction(error: unknown): boolean {
  return isMysqlContention(error) || isMysqlConnectionLoss(error);
}

/** An OK packet as mysql2 returns it, never a row that happens to have a `serverStatus` column. */
function isResultHeader(value: unknown): value is { serverStatus: number } {
  return typeof value === "object" && value !== null && value.constructor?.name === "ResultSetHeader"
    && typeof (value as { serverStatus?: unknown }).serverStatus === "number";
}

/** Reads the server's in-transaction flag from a statement's OK packet(s). */
function noteSessionStatus(result: unknown, session: SessionState): void {
  const headers: unknown[] = Array.isArray(result) ? result : [result];
  for (const h of headers) {
    if (isResultHeader(h) && (h.serverStatus & SERVER_STATUS_IN_TRANS) === 0 && session.ended === undefined) {
      session.ended = new InboxConfigError(
        "the inbox transaction ended before the store committed it (a COMMIT, ROLLBACK or DDL statement in the handler?): " +
          "the handler's later writes were not part of it",
      );
    }
  }
}

/** Runs one of the store's own statements on the transaction's connection. */
async function run(connection: MysqlConnection, session: SessionState, sql: string, values: MysqlValue[]): Promise<[unknown, unknown]> {
  if (session.ended !== undefined) throw classifyMysqlError(session.ended);
  try {
    const result = await connection.execute(sql, values);
    noteSessionStatus(result[0], session);
    return result;
  } catch (error) {
    if (endsTransaction(error)) session.ended ??= error;
    throw error;
  }
}

/**
 * The handle handlers receive: the same connection, whose `query` and `execute` refuse to run
 * once the transaction has ended on the server (after a deadlock the session would otherwise go
 * on in autocommit mode) and record such an end for the store to refuse the COMMIT.
 */
function guardSession<C extends MysqlConnection>(connection: C, session: SessionState): C {
  return new Proxy(connection, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if ((property !== "query" && property !== "execute") || typeof value !== "function") return value;
      const method = value as (...args: unknown[]) => Promise<[unknown, unknown]>;
      return async (...args: unknown[]): Promise<[unknown, unknown]> => {
        // The original error, classified: a refused statement is retried like the deadlock was.
        if (session.ended !== undefined) throw classifyMysqlError(session.ended);
        try {
          const result = await method.apply(target, args);
          noteSessionStatus(result[0], session);
          return result;
        } catch (error) {
          if (endsTransaction(error)) session.ended ??= error;
          throw error;
        }
      };
    },
  });
}
