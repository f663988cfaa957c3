import { InboxConfigError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import type { ClaimOptions, OutboxClaim, OutboxRelayStore } from "../../core/store-contract/outbox-relay-store.js";
import { loadDriver } from "../load-driver.js";
import { SqlRelayStore } from "../sql/sql-relay-store.js";
import { type SqliteDatabase, SqliteDriver } from "./driver.js";
import { sqliteInbox } from "./inbox.js";
import { migrateSqlite } from "./migrations.js";
import { SqliteInboxOperations } from "./operations.js";
import { sqliteOutboxWrites } from "./outbox.js";
import { SqliteOutboxRelay } from "./outbox-relay.js";
import { writeProbe } from "../inbox-tables.js";

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
 * SQLite store (better-sqlite3): one writer. Transactions and reads take turns on the one
 * connection, and transactions use BEGIN IMMEDIATE, so several processes on one file queue on
 * the write lock instead of failing at commit. For demos and small deployments.
 */
export class SqliteStore<D extends SqliteDatabase = SqliteDatabase> extends SqlRelayStore<D> implements OutboxRelayStore {
  /** Set by SqlStore from the dialect; typed as the literal it always is. */
  declare readonly dialect: "sqlite";
  private readonly db: D;
  private readonly driver: SqliteDriver<D>;
  protected readonly relay: SqliteOutboxRelay;

  constructor(options: SqliteStoreOptions<D> & { ownsDatabase?: boolean }) {
    if (!options.database) throw new InboxConfigError("SqliteStore needs a database");
    const logger = options.logger ?? silentLogger;
    const driver = new SqliteDriver(options.database, logger, options.ownsDatabase ?? false);
    const dialect = { name: "sqlite", driver, inbox: sqliteInbox, writeProbe: writeProbe(""), outbox: sqliteOutboxWrites, migrate: () => migrateSqlite(driver, logger) };
    // One transaction at a time: the driver lends its one connection to one caller.
    super(dialect, 1);
    this.db = options.database;
    this.driver = driver;
    this.relay = new SqliteOutboxRelay(driver);
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

  /** Retention, quarantine decisions and schema status, taking turns with this store's transactions. */
  operations(): SqliteInboxOperations {
    return new SqliteInboxOperations(this.driver);
  }

  /** Leases: the next claim skips the rows leased to the previous one, and each claim is its own short transaction. */
  readonly overlappingClaims = true;

  claimOutbox(options: ClaimOptions): Promise<OutboxClaim | null> {
    return this.relay.claim(options.limit, options.relayId, options.leaseMs, options.holding);
  }
}
