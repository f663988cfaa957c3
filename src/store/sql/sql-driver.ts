import type { DatabaseHealthTracker } from "./database-health.js";
import type { SqlQuery } from "./sql-query.js";

/** One open transaction as the inbox sees it. */
export interface SqlSession<Handle> {
  /** What the user's handler receives (a pg client, a mysql2 connection, a data layer's transaction...). */
  readonly handle: Handle;
  /** The inbox's own statements, in the same transaction as the handler's. */
  readonly query: SqlQuery;
}

/**
 * How a store reaches its database: the only part of a store that knows whether a connection
 * comes from its own pool or from the user's data layer. Everything it throws is already
 * classified (TransientStoreError for contention and connection loss, CommitOutcomeUnknownError
 * when a COMMIT's fate is unknown); anything else is rethrown as the database reported it.
 */
export interface SqlDriver<Handle> {
  /**
   * Runs `work` in one transaction: BEGIN, work, `beforeCommit`, COMMIT. Any throw rolls back
   * and rethrows (classified). `beforeCommit` runs after `work` and before COMMIT (fault injection).
   */
  transaction<T>(work: (session: SqlSession<Handle>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T>;
  /** Runs `work` outside any explicit transaction (each statement commits on its own). */
  read<T>(work: (query: SqlQuery) => Promise<T>): Promise<T>;
  /** What the driver's transactions met (outages, the node); the store adds the commits that wrote. */
  readonly health: DatabaseHealthTracker;
  /** Ends what the driver created (its pool); never what the user passed in. */
  close(): Promise<void>;
}
