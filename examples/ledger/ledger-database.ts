import type { DatabaseHealth } from "../../src/observability-entry.js";
import {
  type DatabaseTarget, type InboxHandler, type Logger, type OutboxRelayStore, type Store, databaseTargetOf, openStore,
} from "../../src/index.js";
import type { MysqlStore } from "../../src/store/mysql/index.js";
import type { PostgresStore } from "../../src/store/postgres/index.js";
import type { SqliteStore } from "../../src/store/sqlite/index.js";
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
  /** A write the database refuses while it refuses writes; what the store then knows of it (see /readyz). */
  checkWrites(): Promise<DatabaseHealth>;
  close(): Promise<void>;
}

/**
 * Opens the database named by DATABASE_URL (openStore: `postgres://` / `postgresql://`,
 * `mysql://` / `mariadb://`, or an SQLite file as `sqlite:<path>`, `file:<path>` or a plain path;
 * default ./data/ledger.sqlite). Creates the inbox and ledger tables when missing.
 */
export async function openLedgerDatabase(url: string | undefined, logger: Logger, handlerOptions: LedgerHandlerOptions = {}): Promise<LedgerDatabase> {
  const given = url?.trim() || DEFAULT_SQLITE_PATH;
  const target = databaseTargetOf(given, "DATABASE_URL");
  const store = await openStore(given, { logger, source: "DATABASE_URL" });
  if (store.dialect === "postgres") return openPostgres(store, target, handlerOptions);
  if (store.dialect === "mysql") return openMysql(store, target, handlerOptions);
  return openSqlite(store, target, handlerOptions);
}

async function openPostgres(store: PostgresStore, target: DatabaseTarget, handlerOptions: LedgerHandlerOptions): Promise<LedgerDatabase> {
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
    description: target.description,
    outbox: store,
    async balances() {
      return store.transaction(async (tx) => {
        const { rows } = await tx.handle.query("SELECT tenant, account_id, balance_cents::text AS b FROM ledger_accounts ORDER BY tenant COLLATE \"C\", account_id COLLATE \"C\"");
        return rows.map((r) => ({ tenant: String(r.tenant), account_id: String(r.account_id), balance_cents: Number(r.b) }));
      });
    },
    checkWrites: () => store.checkWrites(),
    close: () => store.close(),
  };
}

async function openMysql(store: MysqlStore, target: DatabaseTarget, handlerOptions: LedgerHandlerOptions): Promise<LedgerDatabase> {
  try {
    await store.migrate();
    // DDL commits implicitly on MySQL: never inside the store's transaction. On the store's own
    // pool, so on the node it writes to when the URL lists several.
    await store.withConnection(async (connection) => { await connection.query(mysqlLedgerSchema); });
  } catch (error) {
    await store.close();
    throw error;
  }
  return {
    store,
    handler: ledgerHandler(mysqlLedgerSql, handlerOptions),
    description: target.description,
    outbox: store,
    async balances() {
      return store.transaction(async (tx) => {
        const [rows] = await tx.handle.query("SELECT tenant, account_id, CAST(balance_cents AS CHAR) AS b FROM ledger_accounts ORDER BY tenant, account_id");
        return (rows as Array<{ tenant: string; account_id: string; b: string }>).map((r) => ({ tenant: r.tenant, account_id: r.account_id, balance_cents: Number(r.b) }));
      });
    },
    checkWrites: () => store.checkWrites(),
    close: () => store.close(),
  };
}

async function openSqlite(store: SqliteStore, target: DatabaseTarget, handlerOptions: LedgerHandlerOptions): Promise<LedgerDatabase> {
  await store.migrate();
  await store.transaction(async (tx) => { tx.handle.exec(sqliteLedgerSchema); await Promise.resolve(); });
  return {
    store: store,
    handler: ledgerHandler(sqliteLedgerSql, handlerOptions),
    description: target.description,
    outbox: store,
    balances() {
      const rows = store.database
        .prepare("SELECT tenant, account_id, balance_cents FROM ledger_accounts ORDER BY tenant, account_id")
        .all() as Array<{ tenant: string; account_id: string; balance_cents: number }>;
      return Promise.resolve(rows.map((r) => ({ tenant: r.tenant, account_id: r.account_id, balance_cents: Number(r.balance_cents) })));
    },
    checkWrites: () => store.checkWrites(),
    close: () => store.close(),
  };
}
