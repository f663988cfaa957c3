import { InboxError, TransientStoreError, describeError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import { PooledDriver, type PooledSession } from "../sql/pooled-driver.js";
import type { SqlQuery, SqlResult, SqlRow, SqlStatement } from "../sql/sql-query.js";
import { classifyMysqlError, discardsMysqlSession, isMysqlConnectionLoss } from "./errors.js";
import type { ServerCheck } from "./server-check.js";
import { PacketLimit } from "./packet-limit.js";
import { SessionGuard } from "./session-guard.js";

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

/** How a driver's transactions set up their session. */
export interface MysqlSessionSettings {
  /** Set with `SET TRANSACTION` before each transaction; undefined: the session's level. */
  isolationLevel?: MysqlIsolationLevel;
  /** innodb_lock_wait_timeout for the transaction, put back before the connection returns to the pool. */
  lockWaitTimeoutS?: number;
  /**
   * False for the relay's and the operator's short transactions: their statements are safe to
   * run again, so a session lost during their COMMIT is a lost connection to retry, as before,
   * rather than an unknown outcome.
   */
  commitOutcomeMatters?: boolean;
}

/**
 * The relay's and the operator's short transactions: every statement reads the latest committed
 * rows (as PostgreSQL's default), and InnoDB takes no gap locks for their locking reads, so their
 * locks never block the consumers' inserts. `SET TRANSACTION` applies to the next transaction
 * only: the pooled session keeps its own level.
 */
export const SHORT_READ_COMMITTED: MysqlSessionSettings = { isolationLevel: "READ COMMITTED", commitOutcomeMatters: false };

export interface MysqlDriverOptions<C extends MysqlConnection> extends MysqlSessionSettings {
  pool: MysqlPool<C>;
  /** Shared by the drivers of one pool (see withSettings): the server's limit is read once. */
  packetLimit?: PacketLimit;
  /** True when the driver created the pool and ends it on close. */
  ownsPool: boolean;
  logger: Logger;
  /** Run on the first transaction's connection, unless migrate ran it first. */
  serverCheck?: ServerCheck;
}

/**
 * MySQL / MariaDB over a mysql2 pool: one pooled connection per transaction, the handler's
 * handle guarded (SessionGuard), ROLLBACK after any failure (1205 rolled back only the
 * statement, and a failed COMMIT may have left the transaction open), and a connection whose
 * error is fatal destroyed, never released.
 */
export class MysqlDriver<C extends MysqlConnection = MysqlConnection> extends PooledDriver<C, C> {
  private readonly pool: MysqlPool<C>;
  private readonly packetLimit: PacketLimit;

  constructor(private readonly options: MysqlDriverOptions<C>) {
    super();
    this.pool = options.pool;
    this.packetLimit = options.packetLimit ?? new PacketLimit();
  }

  /** A driver on the same pool whose transactions use other settings; it never ends the pool nor checks the server. */
  withSettings(settings: MysqlSessionSettings): MysqlDriver<C> {
    const driver = new MysqlDriver({ pool: this.pool, ownsPool: false, logger: this.options.logger, packetLimit: this.packetLimit, ...settings });
    // One database, one health: what the relay's transactions meet counts too.
    driver.health = this.health;
    return driver;
  }

  /**
   * One connection outside any transaction, for work that leaves state on its session (a named
   * lock): `discard` asks for the connection to be destroyed rather than given back.
   */
  async pinned<T>(work: (query: SqlQuery, discard: () => void, connection: C) => Promise<T>): Promise<T> {
    const connection = await this.acquire();
    let broken = false;
    try {
      return await work(this.autocommit(connection), () => { broken = true; }, connection);
    } catch (error) {
      broken ||= discardsMysqlSession(error);
      throw classifyMysqlError(error, false, nodeOfMysqlConnection(connection));
    } finally {
      this.release(connection, broken);
    }
  }

  async close(): Promise<void> {
    if (this.options.ownsPool) await this.pool.end();
  }

  /** A pooled connection; failing to get one means the database is unavailable, not that the event is bad. */
  protected async acquire(): Promise<C> {
    try {
      return await this.pool.getConnection();
    } catch (error) {
      // A multi-host pool's own answer (no node fits) is classified already.
      if (error instanceof InboxError) throw error;
      const classified = classifyMysqlError(error);
      if (classified !== error) throw classified;
      throw new TransientStoreError(`no MySQL connection: ${describeError(error)}`, { cause: error, kind: "connection" });
    }
  }

  protected release(connection: C, broken: boolean): void {
    if (broken) connection.destroy();
    else connection.release();
  }

  protected startSession(connection: C): PooledSession<C> {
    return new MysqlSession(connection, this.options, this.packetLimit);
  }

  protected autocommit(connection: C): SqlQuery {
    return (statement) => runOn(connection, statement).then(sqlResultOf);
  }

  protected isConnectionLoss(error: unknown): boolean {
    return isMysqlConnectionLoss(error);
  }

  protected classify(error: unknown, duringCommit: boolean, connection?: C): unknown {
    return classifyMysqlError(error, duringCommit && this.options.commitOutcomeMatters !== false, connection ? nodeOfMysqlConnection(connection) : null);
  }

  protected override nodeOf(connection: C): string | null {
    return nodeOfMysqlConnection(connection);
  }
}

/** `host:port` of a mysql2 connection (the promise wrapper keeps the core connection's config); null when it does not say. */
export function nodeOfMysqlConnection(connection: object): string | null {
  const core = (connection as { connection?: { config?: { host?: unknown; port?: unknown } } }).connection;
  const config = core?.config ?? (connection as { config?: { host?: unknown; port?: unknown } }).config;
  if (typeof config?.host !== "string" || config.host === "") return null;
  return `${config.host.includes(":") ? `[${config.host}]` : config.host}:${typeof config.port === "number" ? config.port : 3306}`;
}

/** One transaction on a borrowed connection: its own statements and the handler's go through the session guard. */
class MysqlSession<C extends MysqlConnection> implements PooledSession<C> {
  readonly handle: C;
  readonly query: SqlQuery;
  private readonly guard: SessionGuard;
  private lockWaitSet = false;
  private restoreFailed = false;

  constructor(private readonly connection: C, private readonly options: MysqlDriverOptions<C>, packetLimit: PacketLimit) {
    // A statement over the server's packet limit is refused before it is sent, the handler's as the store's.
    this.guard = new SessionGuard((method, args) => packetLimit.checkCall(connection, method, args));
    this.handle = this.guard.guard(connection);
    this.query = (statement) => this.guard.run(async () => {
      await packetLimit.check(connection, statement.text, statement.values, statement.values.length === 0);
      return runOn(connection, statement);
    }).then(sqlResultOf);
  }

  get broken(): boolean {
    return this.guard.broken || this.restoreFailed;
  }

  async begin(): Promise<void> {
    const { serverCheck, lockWaitTimeoutS, isolationLevel } = this.options;
    if (serverCheck && !serverCheck.done) await serverCheck.run((statement) => runOn(this.connection, statement).then(sqlResultOf));
    if (lockWaitTimeoutS !== undefined) {
      // A session variable (MySQL cannot set it per statement): saved here, put back after the transaction.
      await this.connection.query(
        `SET @rabbit_inbox_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = ${Math.trunc(lockWaitTimeoutS)}`);
      this.lockWaitSet = true;
    }
    if (isolationLevel) await this.connection.query(`SET TRANSACTION ISOLATION LEVEL ${isolationLevel}`);
    await this.connection.query("START TRANSACTION");
  }

  async commit(): Promise<void> {
    // A transaction the server already ended must not COMMIT: what ran after its end autocommitted.
    this.guard.checkOpen();
    await this.connection.query("COMMIT");
    // Committed: a failure to restore the session only costs the connection.
    if (!(await this.restoreSession())) this.restoreFailed = true;
  }

  /** Always ROLLBACK: a lock wait timeout left the transaction open, and a failed COMMIT may have too. */
  async rollback(): Promise<boolean> {
    try {
      await this.connection.query("ROLLBACK");
    } catch (error) {
      this.options.logger.warn("MySQL rollback failed; the connection is discarded", { error: describeError(error) });
      return false;
    }
    return this.restoreSession();
  }

  end(): void {
    // Nothing to undo: the guard dies with the session.
  }

  private async restoreSession(): Promise<boolean> {
    if (!this.lockWaitSet) return true;
    try {
      await this.connection.query("SET SESSION innodb_lock_wait_timeout = @rabbit_inbox_lock_wait");
      this.lockWaitSet = false;
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * One statement of the store's own. Parameters go through `execute` (prepared once per
 * connection by mysql2); a statement without any, such as one carrying an inlined list of row
 * ids, goes as text, so that each distinct list is not prepared and cached.
 */
function runOn(connection: MysqlConnection, statement: SqlStatement): Promise<[unknown, unknown]> {
  const values = statement.values as MysqlValue[];
  return values.length === 0 ? connection.query(statement.text) : connection.execute(statement.text, values);
}

/** mysql2's result as rows, or as the OK packet's counts: `affected` is its affectedRows. */
function sqlResultOf([result]: [unknown, unknown]): SqlResult {
  if (Array.isArray(result)) return { rows: result as SqlRow[], affected: 0 };
  const header = result as Partial<MysqlResultHeader> & { insertId?: unknown };
  return { rows: [], affected: Number(header.affectedRows ?? 0), insertId: Number(header.insertId ?? 0) };
}
