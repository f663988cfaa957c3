import { InboxConfigError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import type { ClaimOptions, OutboxClaim, OutboxRelayStore } from "../../core/store-contract/outbox-relay-store.js";
import { hasHostList, serverListOf } from "../host-list.js";
import { loadDriver } from "../load-driver.js";
import { SqlRelayStore } from "../sql/sql-relay-store.js";
import { type MysqlConnection, MysqlDriver, type MysqlIsolationLevel, type MysqlPool, SHORT_READ_COMMITTED } from "./driver.js";
import { mysqlInboxStatements } from "./inbox.js";
import { migrateMysql } from "./migrations.js";
import { MysqlInboxOperations, operationsDriversOn } from "./operations.js";
import { mysqlLeasedWrite, mysqlOutboxWrites } from "./outbox.js";
import { MultiHostMysqlPool, type MysqlNodePool } from "./multi-host-pool.js";
import { MysqlOutboxRelay } from "./outbox-relay.js";
import { ServerCheck } from "./server-check.js";
import { quoteIdent } from "./values.js";
import { writeProbe } from "../inbox-tables.js";

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
   * stack shows where it was sent from. Default false: the capture costs CPU on every statement
   * (strict mode sends four per message), and the store's logs name the handler and the event of
   * a failure anyway. Errors keep their message and code either way.
   */
  traceQueries?: boolean;
}

const ISOLATION_LEVELS: ReadonlySet<string> = new Set(["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"]);

/**
 * MySQL / MariaDB (InnoDB) store: one pooled connection per transaction (MysqlDriver, whose
 * session guard keeps a handler from writing past a deadlock or its own COMMIT), claims by
 * `INSERT ... ON DUPLICATE KEY UPDATE` (claim.ts) with the stale fence and the operator's replay
 * grants inside the claim, a transactional outbox with a relay side (`FOR UPDATE SKIP LOCKED`
 * claims, polling only: outbox-relay.ts; rows written leased for this process's relay to
 * publish from memory: outbox.ts), and `operations()` for retention and the
 * `rabbit-inbox` command. Failures are classified by classifyMysqlError.
 */
export class MysqlStore<C extends MysqlConnection = MysqlConnection> extends SqlRelayStore<C> implements OutboxRelayStore {
  /** Narrowed from SqlStore's `string`, so `store.dialect === "mysql"` tells a MysqlStore from the others. */
  declare readonly dialect: "mysql";
  private readonly pool: MysqlPool<C>;
  private readonly driver: MysqlDriver<C>;
  private readonly prefix: string;
  protected readonly relay: MysqlOutboxRelay;

  constructor(options: MysqlStoreOptions<C> & { ownsPool?: boolean }) {
    if (!options.pool) throw new InboxConfigError("MysqlStore needs a pool");
    if (options.isolationLevel !== undefined && !ISOLATION_LEVELS.has(options.isolationLevel)) {
      throw new InboxConfigError(`MysqlStore isolationLevel must be one of ${[...ISOLATION_LEVELS].join(", ")}`);
    }
    const logger = options.logger ?? silentLogger;
    const serverCheck = new ServerCheck(logger);
    const driver = new MysqlDriver({
      pool: options.pool, ownsPool: options.ownsPool ?? false, logger, serverCheck,
      ...(options.isolationLevel ? { isolationLevel: options.isolationLevel } : {}),
    });
    const target = { database: options.database, prefix: options.database ? `${quoteIdent(options.database)}.` : "" };
    // A duplicate's resend is a short READ COMMITTED transaction of its own, like the relay's claims.
    const readCommitted = driver.withSettings(SHORT_READ_COMMITTED);
    const outbox = mysqlOutboxWrites(target.prefix);
    super({
      name: "mysql",
      driver,
      inbox: mysqlInboxStatements(target.prefix),
      writeProbe: writeProbe(target.prefix),
      outbox: {
        write: (query, records) => outbox.write(query, records),
        writeLeased: mysqlLeasedWrite(target.prefix, serverCheck),
        resend: (_driver, handler, keys) => outbox.resend(readCommitted, handler, keys),
      },
      migrate: () => driver.pinned(async (query, discard) => {
        await serverCheck.run(query);
        await migrateMysql(query, target, logger, discard);
      }),
    }, options.maxConcurrentTransactions ?? 10);
    this.pool = options.pool;
    this.driver = driver;
    this.prefix = target.prefix;
    this.relay = new MysqlOutboxRelay(readCommitted, target.prefix);
  }

  /**
   * Creates a pool from a `mysql://` URL (loads `mysql2` on demand) and a store that owns it. The
   * URL may list several nodes, `mysql://u:pw@h1:3311,h2:3312/db`: the store writes to the first
   * whose `@@read_only` is off (`?target_session_attrs=` as for PostgreSQL) and follows a failover.
   */
  static async connect(url: string, options: MysqlConnectOptions = {}): Promise<MysqlStore> {
    const mysql = await loadDriver<{ createPool(config: object): MysqlNodePool }>("mysql2/promise", "the MySQL store");
    const logger = options.logger ?? silentLogger;
    const createPool = (uri: string): MysqlNodePool => {
      const pool = mysql.createPool({ uri, connectionLimit: options.poolSize ?? 10, trace: options.traceQueries ?? false });
      // mysql2 removes a pooled connection from the pool on its first 'error' event, with a
      // once-listener; a second 'error' on the same dead connection, with no listener left, would
      // crash the process.
      pool.on("connection", (connection) => {
        connection.on("error", (error: Error) => logger.warn("MySQL connection lost", { error: error.message }));
      });
      return pool;
    };
    const pool = hasHostList(url) ? new MultiHostMysqlPool(serverListOf(url, 3306), createPool, logger) : createPool(url);
    const { poolSize: _poolSize, traceQueries: _traceQueries, ...storeOptions } = options;
    return new MysqlStore({ ...storeOptions, pool, ownsPool: true });
  }

  /**
   * Runs `work` on one pooled connection outside any transaction, for statements that must not
   * run in one (DDL commits implicitly on MySQL), on the node the store writes to.
   */
  withConnection<T>(work: (connection: C) => Promise<T>): Promise<T> {
    return this.driver.pinned((_query, _discard, connection) => work(connection));
  }

  /** Retention, quarantine decisions and schema status, on this store's pool (the `rabbit-inbox` command uses it). */
  operations(): MysqlInboxOperations {
    return new MysqlInboxOperations(operationsDriversOn(this.driver), this.prefix);
  }

  /** Yes: a claim's locking reads go through the primary key only, so a claim holds no lock on the rows of the claim before it (outbox-relay.ts). */
  readonly overlappingClaims = true;

  /** Rows held FOR UPDATE SKIP LOCKED in an open transaction until settled (no lease: `relayId` and `leaseMs` are unused). */
  claimOutbox(options: Pick<ClaimOptions, "limit" | "holding">): Promise<OutboxClaim | null> {
    return this.relay.claim(options.limit, options.holding);
  }
}
