import type { QuarantineAdmin } from "../quarantine/quarantine-admin.js";
import type { RetentionStore } from "../retention/retention-store.js";
import type { Migration } from "./migration.js";

/**
 * Operator-side access to a store's tables: retention, the quarantine's decisions, and the
 * schema version. Separate from the Store contract, which is the consumers' hot path: a store
 * that has no operations yet still consumes correctly.
 */
export interface InboxOperations extends RetentionStore, QuarantineAdmin {
  readonly dialect: string;
  /** The migrations this build of the library knows for the dialect. */
  readonly migrations: readonly Migration[];
  /** Versions recorded in `rabbit_inbox_migrations`; empty when the table does not exist yet. */
  appliedMigrations(): Promise<number[]>;
  /** The outbox's unsent rows, for an operator: how many, how old, how many fail to publish. */
  outboxBacklog(): Promise<OutboxBacklog>;
  /** Unsent rows whose publish failed, most attempts first: what an operator looks at when `failing` is not 0. */
  failingOutboxRows(limit: number): Promise<FailingOutboxRow[]>;
}

export interface FailingOutboxRow {
  id: number;
  exchange: string;
  routingKey: string;
  attempts: number;
  lastError: string;
  createdAt: Date;
  /** When the relay tries it again. */
  availableAt: Date;
}

/** What waits in the outbox. Counting reads every unsent row: an operator's query, not the relay's. */
export interface OutboxBacklog {
  /** Rows not sent yet (due, waiting for a retry, or being published right now). */
  pending: number;
  /** When the oldest unsent row was written; null when nothing is pending. */
  oldestPendingAt: Date | null;
  /** The database's clock, to age `oldestPendingAt` against. */
  now: Date;
  /** Unsent rows whose publish failed at least once (they wait for a retry). */
  failing: number;
  /** Of those, rows the broker returned as unroutable: nothing is bound where they go. */
  unroutable: number;
  /** The failing row with the most attempts, as an example; null when nothing failed. */
  worst: { exchange: string; routingKey: string; attempts: number; lastError: string } | null;
}

/** The text of the relay's error for a publish the broker returned: no queue was bound. */
export const UNROUTABLE_MARK = "unroutable";

/** A store that offers operations, e.g. PostgresStore and SqliteStore. */
export interface OperationsCapable {
  operations(): InboxOperations;
}

export function hasOperations(store: object): store is OperationsCapable {
  return typeof (store as Partial<OperationsCapable>).operations === "function";
}

/**
 * A write that changes nothing (it matches no row), which a database refusing writes refuses:
 * read-only nodes check the statement, not the rows it would touch.
 */
export function writeProbe(prefix: string): { text: string; values: [] } {
  return { text: `DELETE FROM ${inboxTableNames(prefix).redelivery} WHERE 1 = 0`, values: [] };
}

/** Names of the inbox's tables under a qualified prefix (empty, or a schema/database and a dot). */
export function inboxTableNames(prefix: string) {
  return {
    migrations: `${prefix}rabbit_inbox_migrations`,
    dedup: `${prefix}rabbit_inbox_dedup`,
    quarantine: `${prefix}rabbit_inbox_quarantine`,
    horizon: `${prefix}rabbit_inbox_purge_horizon`,
    audit: `${prefix}rabbit_inbox_quarantine_audit`,
    grant: `${prefix}rabbit_inbox_replay_grant`,
    redelivery: `${prefix}rabbit_inbox_redelivery`,
  };
}
