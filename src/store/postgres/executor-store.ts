import { InboxConfigError, TransientStoreError } from "../../core/errors.js";
import { plainArrays } from "./array-parameters.js";
import { postgresTransactionStatements } from "./transaction-statements.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import { type ExecutorDialect, ExecutorDriver, type SqlExecutor } from "../sql/executor-driver.js";
import { SqlStore } from "../sql/sql-store.js";
import { classifyPostgresError } from "./errors.js";
import { migratePostgres } from "./migrations.js";
import { schemaPrefix } from "./store.js";

/**
 * What a data layer (Kysely, Knex, Drizzle, Prisma...) lends the inbox on PostgreSQL: statements
 * with `$1`-style placeholders, run at the database's default isolation (READ COMMITTED is what
 * the claim expects). `rabbit-inbox/kysely`, `/knex`, `/drizzle` and `/prisma` build one.
 */
export type PostgresExecutor<Tx> = SqlExecutor<Tx>;

export interface PostgresExecutorStoreOptions<Tx> {
  /** The data layer's transactions and statements, e.g. `fromKysely(db)`. */
  executor: PostgresExecutor<Tx>;
  /** Schema of the inbox tables. Default: unqualified names (the connection's search_path). */
  schema?: string;
  logger?: Logger;
  /** Most transactions a consumer may run at once; keep it at or below the data layer's pool size. Default 10. */
  maxConcurrentTransactions?: number;
}

const ABORTED = "25P02"; // in_failed_sql_transaction

/** What PostgreSQL adds to a data layer's transactions: its error classes, and the aborted-transaction check. */
export const postgresExecutorDialect: ExecutorDialect = {
  classify: (error, duringCommit) => classifyPostgresError(error, duringCommit),
  /**
   * A handler that caught an SQL error and carried on leaves the transaction aborted, and
   * PostgreSQL answers its COMMIT with ROLLBACK, not an error: most data layers then report
   * success. One trivial statement before COMMIT tells an aborted transaction (it fails with
   * 25P02) from a healthy one, so nothing is reported applied that was not written.
   */
  async checkBeforeCommit(query, unwrap) {
    try {
      await query({ text: "SELECT 1", values: [] });
    } catch (error) {
      if ((unwrap(error) as { code?: unknown } | null)?.code === ABORTED) {
        throw new TransientStoreError("the transaction was aborted by an earlier failed statement (did the handler catch an SQL error?); nothing was committed", { cause: error });
      }
      throw error;
    }
  },
};

/**
 * A PostgreSQL store that runs inside the user's own data layer: each inbox transaction is one
 * transaction of that data layer (Kysely, Knex, Drizzle, Prisma), the handler receives its
 * transaction object as `ctx.tx`, and the inbox record, quarantine rows and outbox rows are
 * written through that same transaction with the same SQL as PostgresStore. The data layer
 * commits; a throw rolls back the inbox record and the business writes together.
 *
 * Not here, by design: the outbox relay's claim (it holds row locks while it publishes) and the
 * operator's `operations()`. Run `OutboxRelay` and the `rabbit-inbox` command on a PostgresStore
 * over the same tables (docs/byo-transaction.md).
 */
export class PostgresExecutorStore<Tx> extends SqlStore<Tx> {
  /** Narrowed from SqlStore's `string`, as it was. */
  declare readonly dialect: "postgres";
  constructor(options: PostgresExecutorStoreOptions<Tx>) {
    if (!options.executor) throw new InboxConfigError("PostgresExecutorStore needs an executor, e.g. fromKysely(db)");
    const prefix = schemaPrefix(options.schema);
    const logger = options.logger ?? silentLogger;
    const driver = new ExecutorDriver(options.executor, postgresExecutorDialect);
    super({
      ...postgresTransactionStatements(prefix, options.schema, plainArrays),
      driver,
      // Statement by statement: some data layers prepare every statement, and a prepared
      // statement holds one command. Same lock and version table as PostgresStore.migrate.
      migrate: () => driver.transaction(({ query }) => migratePostgres(query, { prefix, logger, statementByStatement: true })),
    }, options.maxConcurrentTransactions ?? 10);
  }
}
