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
}

/** A store that offers operations, e.g. PostgresStore and SqliteStore. */
export interface OperationsCapable {
  operations(): InboxOperations;
}

export function hasOperations(store: object): store is OperationsCapable {
  return typeof (store as Partial<OperationsCapable>).operations === "function";
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
