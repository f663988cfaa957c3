import { InboxConfigError, describeError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import { silentLogger } from "../../core/logger.js";
import { ExecutorDriver, type SqlExecutor } from "../sql/executor-driver.js";
import type { SqlQuery } from "../sql/sql-query.js";
import { SqlStore } from "../sql/sql-store.js";
import { classifyMysqlError } from "./errors.js";
import { mysqlExecutorDialect } from "./executor-dialect.js";
import { mysqlInboxStatements } from "./inbox.js";
import { migrateMysql } from "./migrations.js";
import { mysqlOutboxWrites } from "./outbox.js";
import { ServerCheck } from "./server-check.js";
import { quoteIdent } from "./values.js";
import { writeProbe } from "../inbox-tables.js";

export interface MysqlExecutorStoreOptions<Tx> {
  /** The data layer's transactions and statements, e.g. `fromKyselyMysql(db)`. */
  executor: SqlExecutor<Tx>;
  /** Database holding the inbox tables. Default: the connection's current database. */
  database?: string;
  logger?: Logger;
  /** Most transactions a consumer may run at once; keep it at or below the data layer's pool size. Default 10. */
  maxConcurrentTransactions?: number;
}

/**
 * A MySQL / MariaDB store that runs inside the user's own data layer: each inbox transaction is
 * one transaction of that data layer (Kysely, Knex, Drizzle, Prisma), the handler receives its
 * transaction object as `ctx.tx`, and the inbox record, quarantine rows and outbox rows are
 * written through that same transaction with the same SQL as MysqlStore. The data layer commits;
 * a throw rolls back the inbox record and the business writes together, and a transaction the
 * server already ended (a deadlock the handler swallowed) is refused before COMMIT.
 *
 * Not here, by design: the outbox relay's claim and the operator's `operations()`. Run
 * `OutboxRelay` and the `rabbit-inbox` command on a MysqlStore over the same tables
 * (docs/byo-transaction.md).
 */
export class MysqlExecutorStore<Tx> extends SqlStore<Tx> {
  constructor(options: MysqlExecutorStoreOptions<Tx>) {
    if (!options.executor) throw new InboxConfigError("MysqlExecutorStore needs an executor, e.g. fromKyselyMysql(db)");
    const { executor, database } = options;
    const prefix = database ? `${quoteIdent(database)}.` : "";
    const logger = options.logger ?? silentLogger;
    super({
      name: "mysql",
      driver: new ExecutorDriver(executor, mysqlExecutorDialect()),
      inbox: mysqlInboxStatements(prefix),
      writeProbe: writeProbe(prefix),
      outbox: mysqlOutboxWrites(prefix),
      migrate: () => migrateThrough(executor, { database, prefix }, logger),
    }, options.maxConcurrentTransactions ?? 10);
  }
}

/**
 * The MySQL migrations through the data layer, on the one connection of one of its
 * transactions (the migration lock belongs to the session). DDL commits implicitly, so the
 * transaction is only a way to hold a connection: the data layer's final COMMIT has nothing
 * left to commit. Same lock and version table as MysqlStore.migrate: either may run first.
 */
async function migrateThrough<Tx>(executor: SqlExecutor<Tx>, target: { database: string | undefined; prefix: string }, logger: Logger): Promise<void> {
  const unwrap = (error: unknown) => executor.driverError?.(error) ?? error;
  try {
    await executor.transaction(async (tx) => {
      const query: SqlQuery = async (statement) => {
        const result = await executor.query(statement.text, statement.values, tx);
        return { rows: result.rows, affected: result.rowCount ?? result.rows.length };
      };
      await new ServerCheck(logger).run(query);
      await migrateMysql(query, target, logger, (error?: unknown) => {
        // The data layer keeps the connection: the lock goes when its session ends.
        logger.warn("could not release the MySQL migration lock", { error: describeError(error) });
      });
    });
  } catch (error) {
    const classified = classifyMysqlError(unwrap(error));
    throw classified === unwrap(error) ? error : classified;
  }
}
