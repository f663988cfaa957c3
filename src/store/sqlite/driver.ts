import type { Logger } from "../../core/logger.js";
import type { ColumnReader } from "../sql/column-reader.js";
import { type PooledSession, PooledDriver } from "../sql/pooled-driver.js";
import type { SqlQuery, SqlResult, SqlStatement } from "../sql/sql-query.js";
import { classifySqliteError } from "./errors.js";

/** The slice of a better-sqlite3 statement the store uses. */
export interface SqliteStatement {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  /** True when the statement returns rows (a SELECT, or a write with RETURNING). */
  readonly reader: boolean;
}

/** The slice of a better-sqlite3 Database the store uses; the handler receives the whole of it. */
export interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): unknown;
  pragma(sql: string): unknown;
  close(): unknown;
  readonly inTransaction: boolean;
}

/** better-sqlite3 hands over TEXT as strings, times as the epoch ms this store writes, BLOBs as Buffers. */
export const sqliteColumns: ColumnReader = {
  text: (value) => String(value),
  date: (value) => new Date(Number(value)),
  bytes: (value) => (Buffer.isBuffer(value) ? value : Buffer.from(value as Uint8Array)),
};

/**
 * SQLite has one writer, and better-sqlite3 one synchronous connection: the "pool" is that
 * connection, lent to one transaction or read at a time, in the order they asked. So a read
 * never runs in the middle of another caller's open transaction (it would see its uncommitted
 * rows), and transactions of one process queue here instead of failing on the write lock;
 * other processes on the same file wait on that lock (busy_timeout). Every transaction is
 * BEGIN IMMEDIATE: it takes the write lock first, so it cannot fail at its first write or at
 * COMMIT because another process wrote in between.
 */
export class SqliteDriver<D extends SqliteDatabase> extends PooledDriver<D, D> {
  private busy = false;
  private readonly waiting: Array<() => void> = [];
  /**
   * Prepared once per SQL text: preparing is the slow part of a statement in better-sqlite3.
   * Every text the store sends is a constant (values go as parameters), so the cache stays small.
   */
  private readonly statements = new Map<string, SqliteStatement>();
  private readonly query: SqlQuery = (statement) => this.run(statement);

  constructor(private readonly db: D, private readonly logger: Logger, private readonly ownsDatabase: boolean) {
    super();
  }

  protected acquire(): Promise<D> {
    if (!this.busy) {
      this.busy = true;
      return Promise.resolve(this.db);
    }
    return new Promise((resolve) => this.waiting.push(() => resolve(this.db)));
  }

  /**
   * Hands the connection to the next in line. A connection whose rollback failed cannot be
   * replaced by another (there is only this one): the next BEGIN reports what is wrong with it.
   */
  protected release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.busy = false;
  }

  protected startSession(db: D): PooledSession<D> {
    return {
      handle: db,
      query: this.query,
      begin: () => this.run({ text: "BEGIN IMMEDIATE", values: [] }).then(() => undefined),
      commit: () => this.run({ text: "COMMIT", values: [] }).then(() => undefined),
      rollback: () => Promise.resolve(this.rollback(db)),
      broken: false,
      end: () => undefined,
    };
  }

  /** Outside a transaction each statement commits on its own. */
  protected autocommit(): SqlQuery {
    return this.query;
  }

  /** The database is a file this process opened: there is no connection to lose. */
  protected isConnectionLoss(): boolean {
    return false;
  }

  protected classify(error: unknown): unknown {
    return classifySqliteError(error);
  }

  /** Waits for every transaction and read queued before it; closes the database only if the store opened it. */
  async close(): Promise<void> {
    await this.acquire();
    try {
      if (this.ownsDatabase) this.db.close();
    } finally {
      this.release();
    }
  }

  /**
   * One statement, synchronously, answered as a settled promise: the only promise a statement
   * costs (a batch claim runs one INSERT per key). Parameters are positional (`?`), or one
   * object for named ones (`@now`).
   */
  private run(statement: SqlStatement): Promise<SqlResult> {
    // A settled promise rather than an async function or an executor: the cheapest promise.
    try {
      return Promise.resolve(this.execute(statement));
    } catch (error) {
      // better-sqlite3 throws Errors (SqliteError, TypeError, RangeError) only.
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private execute(statement: SqlStatement): SqlResult {
    const prepared = this.prepared(statement.text);
    if (prepared.reader) {
      const rows = prepared.all(...statement.values) as SqlResult["rows"];
      return { rows, affected: rows.length };
    }
    return { rows: [], affected: prepared.run(...statement.values).changes };
  }

  private prepared(text: string): SqliteStatement {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  /** Rolls back if the transaction is still open (SQLite may have ended it on the error already). */
  private rollback(db: D): boolean {
    if (!db.inTransaction) return true;
    try {
      db.exec("ROLLBACK");
      return true;
    } catch (rollbackError) {
      this.logger.error("SQLite rollback failed", { error: String(rollbackError) });
      return false;
    }
  }
}
