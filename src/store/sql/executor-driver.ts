import { DatabaseHealthTracker } from "./database-health.js";
import type { SqlDriver, SqlSession } from "./sql-driver.js";
import type { SqlQuery, SqlResult, SqlRow } from "./sql-query.js";

/**
 * What a data layer (Kysely, Knex, Drizzle, Prisma...) lends the inbox so that the inbox record
 * is written through the user's own transaction: pg-boss's `executeSql`, plus the transaction
 * itself. `rabbit-inbox/kysely`, `/knex`, `/drizzle` and `/prisma` build one from your instance;
 * another data layer needs these members and nothing else.
 */
export interface SqlExecutor<Tx> {
  /** `kysely`, `knex`, `drizzle`, `prisma`...: for logs and messages. */
  readonly name: string;
  /**
   * Runs `work` in one transaction of the data layer: COMMIT when `work` resolves, ROLLBACK when
   * it throws, and the same error rethrown. The transaction runs at the database's default
   * isolation.
   */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Runs one statement with the database's own placeholders (`$1` on PostgreSQL, `?` on MySQL)
   * inside `tx`, or on its own (autocommit) when `tx` is undefined. Rows come back as objects
   * keyed by column name, untransformed; `rowCount` is the rows a write touched (on MySQL, the
   * driver's affectedRows); `insertId`, where the data layer reports it, the id a MySQL INSERT
   * generated (0 when it inserted no row).
   */
  query(text: string, values: readonly unknown[], tx?: Tx): Promise<{ rows: SqlRow[]; rowCount: number | null; insertId?: number }>;
  /**
   * The driver's error inside the data layer's wrapper (or a stand-in carrying its `code` /
   * `errno` and message), so the dialect can classify it. Undefined: errors are not wrapped.
   */
  driverError?(error: unknown): unknown;
  /**
   * Sends what the data layer still holds back for its COMMIT (MikroORM's unit of work) inside
   * `tx`, once the inbox's work in it is done and before the inbox checks the transaction and
   * hands it back: a failure there is then the transaction's, classified like any statement's,
   * and never mistaken for a COMMIT whose outcome is unknown. Undefined: nothing held back.
   */
  flush?(tx: Tx): Promise<void>;
}

/** What the database adds to a data layer's transactions. */
export interface ExecutorDialect {
  /** The dialect's classification of a driver error; `duringCommit` marks a failure of COMMIT. */
  classify(error: unknown, duringCommit: boolean): unknown;
  /**
   * Runs after the handler, before the data layer commits: proves the transaction is still the
   * one the inbox record was written in (a handler that swallowed an SQL error may have left it
   * aborted, or ended). Throws (classified) when it is not. `unwrap` is the executor's driverError.
   */
  checkBeforeCommit?(query: SqlQuery, unwrap: (error: unknown) => unknown): Promise<void>;
}

/**
 * A driver over the user's data layer: each inbox transaction is one transaction of the data
 * layer, the handler gets its transaction object, and the inbox's statements run through it.
 * The data layer commits; a throw rolls back the inbox record and the business writes together.
 */
export class ExecutorDriver<Tx> implements SqlDriver<Tx> {
  readonly health = new DatabaseHealthTracker();

  constructor(private readonly executor: SqlExecutor<Tx>, private readonly dialect: ExecutorDialect) {}

  async transaction<T>(work: (session: SqlSession<Tx>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    // Set once `work` and the checks succeeded: whatever fails after that failed in the data
    // layer's COMMIT (or its ROLLBACK after a failed COMMIT), where a lost session leaves the
    // outcome unknown.
    const state = { committing: false };
    try {
      const result = await this.executor.transaction(async (tx) => {
        const query = this.queryIn(tx);
        const result = await work({ handle: tx, query });
        await this.executor.flush?.(tx);
        if (beforeCommit) await beforeCommit();
        await this.dialect.checkBeforeCommit?.(query, (error) => this.unwrap(error));
        state.committing = true;
        return result;
      });
      return result;
    } catch (error) {
      const classified = this.classify(error, state.committing);
      this.health.failed(classified, null);
      throw classified;
    }
  }

  async read<T>(work: (query: SqlQuery) => Promise<T>): Promise<T> {
    try {
      return await work(this.queryIn(undefined));
    } catch (error) {
      throw this.classify(error, false);
    }
  }

  /** The data layer and its pool belong to the caller: nothing to close here. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  private queryIn(tx: Tx | undefined): SqlQuery {
    return async (statement) => {
      const result = await this.executor.query(statement.text, statement.values, tx);
      const sqlResult: SqlResult = { rows: result.rows, affected: result.rowCount ?? result.rows.length };
      if (result.insertId !== undefined) sqlResult.insertId = result.insertId;
      return sqlResult;
    };
  }

  private unwrap(error: unknown): unknown {
    return this.executor.driverError?.(error) ?? error;
  }

  /** The dialect's classification of the driver error under the wrapper; an unclassified error is rethrown as the data layer threw it. */
  private classify(error: unknown, duringCommit: boolean): unknown {
    const driverError = this.unwrap(error);
    const classified = this.dialect.classify(driverError, duringCommit);
    return classified === driverError ? error : classified;
  }
}
