/**
 * A database prepared for one benchmark scenario: fresh tables (its own PostgreSQL schema, MariaDB
 * database or SQLite file), the inbox migrated, `ACCOUNTS` ledger accounts at balance 0.
 */
import type { InboxHandler } from "../../src/index.js";
import type { MysqlStore } from "../../src/store/mysql/index.js";
import type { PostgresStore } from "../../src/store/postgres/index.js";
import type { SqliteStore } from "../../src/store/sqlite/index.js";
import type { LedgerEvent } from "../../examples/ledger/events.js";

export const PG_URL = process.env.BENCH_PG_URL || "postgres://postgres@127.0.0.1:5432/test";
/** A server URL: each scenario creates (and drops) its own database there. */
export const MYSQL_URL = process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306/test";
export const ACCOUNTS = 1000;

export type LibraryStore = PostgresStore | MysqlStore | SqliteStore;
export type DatabaseName = "postgres" | "mysql" | "sqlite";

export interface BenchDatabase {
  name: DatabaseName;
  /** Where this scenario's tables are, as DATABASE_URL for the ledger service (openStore). */
  url: string;
  /** Sum of all balances, to check the run applied each event exactly once. */
  total(): Promise<number>;
  /** Outbox rows not yet marked sent. */
  pendingOutbox(): Promise<number>;
  /** The naive consumer's one autocommit UPDATE of the event's account. */
  naive(event: Adjustment): Promise<void>;
  handwritten(body: Buffer): Promise<void>;
  libraryStrict(): { store: LibraryStore; handler: InboxHandler<LedgerEvent, never>; concurrency: number };
  libraryBatched(): { store: LibraryStore; handler: InboxHandler<LedgerEvent, never> };
  preloadDedupRows(rows: number): Promise<void>;
  close(): Promise<void>;
}

/** The fields of a bench event body (see eventBody in harness.ts) that the baselines use. */
export interface Adjustment { tenant: string; eventId: string; accountId: string; delta: number }

export function adjustment(body: Buffer): Adjustment {
  const e = JSON.parse(body.toString()) as { tenant: string; event_id: string; account_id: string; delta_cents: number };
  return { tenant: e.tenant, eventId: e.event_id, accountId: e.account_id, delta: e.delta_cents };
}
