import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { type InboxHandler, InboxConfigError, type Logger, type OutboxRelayStore, type Store, redactSecrets } from "../../src/index.js";
import { MysqlStore } from "../../src/store/mysql/index.js";
import { PostgresStore } from "../../src/store/postgres/index.js";
import { SqliteStore } from "../../src/store/sqlite/index.js";
import type { LedgerEvent } from "./events.js";
import { type LedgerHandlerOptions, ledgerHandler } from "./ledger-handler.js";
import { mysqlLedgerSchema, mysqlLedgerSql } from "./ledger-mysql.js";
import { postgresLedgerSchema, postgresLedgerSql } from "./ledger-postgres.js";
import { sqliteLedgerSchema, sqliteLedgerSql } from "./ledger-sqlite.js";

export const DEFAULT_SQLITE_PATH = "./data/ledger.sqlite";

export interface BalanceRow {
  tenant: string;
  account_id: string;
  balance_cents: number;
}

/** The ledger's database: the inbox store, the handler bound to it, and read queries. */
export interface LedgerDatabase {
  store: Store<unknown>;
  handler: InboxHandler<LedgerEvent, unknown>;
  /** For logs: the dialect and where, without credentials. */
  description: string;
  /**
   * The outbox the relay publishes `balance.changed` from; absent where a store has no
   * transactional outbox, and then the handler publishes nothing.
   */
  outbox?: OutboxRelayStore;
  balances(): Promise<BalanceRow[]>;
  close(): Promise<void>;
}

/**
 * Opens the database named by DATABASE_URL: `postgres://` / `postgresql://`, `mysql://` /
 * `mariadb://`, or an SQLite file
 * (`sqlite:<path>`, `file:<path>` or a bare path; default ./data/ledger.sqlite). Creates the
 * inbox and ledger tables when missing.
 */
export async function openLedgerDatabase(url: string | undefined, logger: Logger, handlerOptions: LedgerHandlerOptions = {}): Promise<LedgerDatabase> {
  const target = url?.trim() || DEFAULT_SQLITE_PATH;
  if (/^postgres(ql)?:\/\//i.test(target)) return openPostgres(target, logger, handlerOptions);
  if (/^(mysql|mariadb):\/\//i.test(target)) return openMysql(target.replace(/^mariadb:/i, "mysql:"), logger, handlerOptions);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target) && !/^(sqlite|file):/i.test(target)) {
    throw new InboxConfigError(`DATABASE_URL ${redactSecrets(target)}: unsupported scheme (use postgres://, mysql:// or an SQLite path)`);
  }
  return openSqlite(target.replace(/^(sqlite|file):(\/\/)?/i, ""), logger, handlerOptions);
}

async function openPostgres(url: string, logger: Logger, handlerOptions: LedgerHandlerOptions): Promise<LedgerDatabase> {
  const store = await PostgresStore.connect(url, { logger });
  try {
    await store.migrate();
    await store.transaction(async (tx) => {
      // CREATE TABLE IF NOT EXISTS is not safe against itself: two services starting on an empty
      // database fail one with 23505 on pg_type (seen here). Serialize it, as migrate() does.
      await tx.handle.query("SELECT pg_advisory_xact_lock(hashtext('rabbit_inbox_ledger_schema'))");
      await tx.handle.query(postgresLedgerSchema);
    });
  } catch (error) {
    await store.close();
    throw error;
  }
  return {
    store: store,
    handler: ledgerHandler(postgresLedgerSql, handlerOptions),
    description: `postgres ${redactSecrets(url)}`,
    outbox: store,
    async balances() {
      return store.transaction(async (tx) => {
        const { rows } = await tx.handle.query("SELECT tenant, account_id, balance_cents::text AS b FROM ledger_accounts ORDER BY tenant COLLATE \"C\", account_id COLLATE \"C\"");
        return rows.map((r) => ({ tenant: String(r.tenant), account_id: String(r.account_id), balance_cents: Number(r.b) }));
      });
    },
    close: () => store.close(),
  };
}

async function openMysql(url: string, logger: Logger, handlerOptions: LedgerHandlerOptions): Promise<LedgerDatabase> {
  const store = await MysqlStore.connect(url, { logger });
  try {
    await store.migrate();
    // DDL commits implicitly on MySQL: never inside the store's transaction.
    const mysql = await import("mysql2/promise");
    const connection = await mysql.createConnection(url);
    try {
      await connection.query(mysqlLedgerSchema);
    } finally {
      await connection.end();
    }
  } catch (error) {
    await store.close();
    throw error;
  }
  return {
    store,
    handler: ledgerHandler(mysqlLedgerSql, handlerOptions),
    description: `mysql ${redactSecrets(url)}`,
    outbox: store,
    async balances() {
      return store.transaction(async (tx) => {
        const [rows] = await tx.handle.query("SELECT tenant, account_id, CAST(balance_cents AS CHAR) AS b FROM ledger_accounts ORDER BY tenant, account_id");
        return (rows as Array<{ tenant: string; account_id: string; b: string }>).map((r) => ({ tenant: r.tenant, account_id: r.account_id, balance_cents: Number(r.b) }));
      });
    },
    close: () => store.close(),
  };
}

async function openSqlite(path: string, logger: Logger, handlerOptions: LedgerHandlerOptions): Promise<LedgerDatabase> {
  const file = resolve(path);
  mkdirSync(dirname(file), { recursive: true });
  const store = await SqliteStore.open(file, { logger });
  await store.migrate();
  await store.transaction(async (tx) => { tx.handle.exec(sqliteLedgerSchema); await Promise.resolve(); });
  return {
    store: store,
    handler: ledgerHandler(sqliteLedgerSql, handlerOptions),
    description: `sqlite ${file}`,
    outbox: store,
    balances() {
      const rows = store.database
        .prepare("SELECT tenant, account_id, balance_cents FROM ledger_accounts ORDER BY tenant, account_id")
        .all() as Array<{ tenant: string; account_id: string; balance_cents: number }>;
      return Promise.resolve(rows.map((r) => ({ tenant: r.tenant, account_id: r.account_id, balance_cents: Number(r.balance_cents) })));
    },
    close: () => store.close(),
  };
}
