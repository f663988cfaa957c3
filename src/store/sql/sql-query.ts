/** One row as the driver returns it, keyed by column name. */
export type SqlRow = Record<string, unknown>;

/**
 * One statement in the dialect's own placeholder style (`$1` on PostgreSQL, `?` on MySQL and
 * SQLite). `name` lets a driver that can prepare statements prepare it once per connection;
 * others ignore it.
 */
export interface SqlStatement {
  name?: string;
  text: string;
  values: readonly unknown[];
}

/** What every driver's result is turned into: the rows, and how many rows a write touched. */
export interface SqlResult {
  rows: SqlRow[];
  /** Rows inserted, updated or deleted (as the database counts them); 0 for a read. */
  affected: number;
  /**
   * The AUTO_INCREMENT id a MySQL INSERT reported (0 when it inserted no row), where the driver
   * says; undefined elsewhere.
   */
  insertId?: number;
}

/**
 * Runs one statement on the connection (and inside the transaction) the caller holds. Every
 * dialect writes its inbox, outbox and operator SQL once against this, whoever owns the
 * connection: the store's own pool or a data layer's transaction.
 */
export type SqlQuery = (statement: SqlStatement) => Promise<SqlResult>;
