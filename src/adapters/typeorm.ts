import type { DataSource, EntityManager, QueryRunner } from "typeorm";
import { InboxConfigError } from "../core/errors.js";
import { MysqlExecutorStore } from "../store/mysql/executor-store.js";
import { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "../store/postgres/executor-store.js";
import type { SqlExecutor } from "../store/sql/executor-driver.js";
import { type DataLayerDialect, type DataLayerStoreOptions, dataLayerStore } from "./data-layer-store.js";
import { mysqlResultOf } from "./mysql-result.js";

/** The database behind a TypeORM DataSource: its `type` option (`postgres`, or `mysql` / `mariadb`). */
export function typeormDialectOf(dataSource: DataSource): DataLayerDialect {
  const type = dataSource.options.type;
  if (type === "postgres") return "postgres";
  if (type === "mysql" || type === "mariadb") return "mysql";
  throw new InboxConfigError(`typeormStore runs on a DataSource of type "postgres", "mysql" or "mariadb", not ${JSON.stringify(type)}`);
}

/**
 * The driver's error under TypeORM's wrapping, as the dialect classifies it: a failed statement
 * (COMMIT included) comes as QueryFailedError with the driver's error as `driverError`. A query
 * runner whose connection emitted an error releases itself at once, and the next statement
 * (often the COMMIT) then fails with QueryRunnerAlreadyReleasedError without reaching the
 * server: that is a lost session, and `lost` is the driver error that says so on this database.
 */
function typeormDriverError(lost: Record<string, unknown>): (error: unknown) => unknown {
  return (error) => {
    if (!(error instanceof Error)) return error;
    if (error.name === "QueryRunnerAlreadyReleasedError") return Object.assign(new Error(`the connection was lost: ${error.message}`, { cause: error }), lost);
    const driverError = (error as { driverError?: unknown }).driverError;
    return driverError !== undefined ? driverError : error;
  };
}

/**
 * One statement on the transaction's own query runner, or on a runner of its own outside one.
 * The structured result keeps what the plain one drops: pg's rowCount, mysql2's OK packet.
 */
async function runOn(dataSource: DataSource, tx: EntityManager | undefined, text: string, values: readonly unknown[]): Promise<{ raw: unknown; records: unknown[]; affected: number | undefined }> {
  const run = (runner: QueryRunner) => runner.query(text, [...values], true) as Promise<{ raw: unknown; records: unknown[]; affected?: number }>;
  if (tx?.queryRunner) return withAffected(await run(tx.queryRunner));
  const runner = dataSource.createQueryRunner();
  try {
    return withAffected(await run(runner));
  } finally {
    await runner.release();
  }
}

function withAffected(result: { raw: unknown; records: unknown[]; affected?: number }) {
  return { raw: result.raw, records: result.records ?? [], affected: result.affected };
}

/**
 * TypeORM (0.3, `postgres` DataSource) as a PostgresExecutor: `dataSource.transaction()` runs each
 * inbox transaction and hands its EntityManager over as the transaction; the inbox SQL, with its
 * `$1` placeholders as node-postgres takes them, runs on that manager's query runner.
 */
export function fromTypeorm(dataSource: DataSource): SqlExecutor<EntityManager> {
  return {
    name: "typeorm",
    transaction: (work) => dataSource.transaction((manager) => work(manager)),
    async query(text, values, tx) {
      const result = await runOn(dataSource, tx, text, values);
      const rows = result.records as Array<Record<string, unknown>>;
      return { rows, rowCount: result.affected ?? rows.length };
    },
    driverError: typeormDriverError({ code: "08006" }), // connection_failure
  };
}

/**
 * TypeORM (0.3, `mysql` or `mariadb` DataSource on mysql2) as a SqlExecutor on MySQL / MariaDB:
 * the same transactions, the inbox SQL with its `?` placeholders as they are, and the driver's
 * own result (rows, or the OK packet with affectedRows and insertId) read back.
 */
export function fromTypeormMysql(dataSource: DataSource): SqlExecutor<EntityManager> {
  return {
    ...fromTypeorm(dataSource),
    async query(text, values, tx) {
      return mysqlResultOf((await runOn(dataSource, tx, text, values)).raw);
    },
    driverError: typeormDriverError({ code: "PROTOCOL_CONNECTION_LOST", fatal: true }),
  };
}

/**
 * An inbox store on your TypeORM DataSource: handlers get the transaction's EntityManager as
 * `ctx.tx` (repositories through `tx.getRepository(...)`), and the inbox record commits or rolls
 * back with what they write through it. PostgreSQL or MySQL / MariaDB, from the DataSource's type.
 */
export function typeormStore(dataSource: DataSource, options: DataLayerStoreOptions = {}): PostgresExecutorStore<EntityManager> | MysqlExecutorStore<EntityManager> {
  return dataLayerStore(options.dialect ?? typeormDialectOf(dataSource), options, {
    postgres: (pgOptions: Omit<PostgresExecutorStoreOptions<EntityManager>, "executor">) => new PostgresExecutorStore({ ...pgOptions, executor: fromTypeorm(dataSource) }),
    mysql: (mysqlOptions) => new MysqlExecutorStore({ ...mysqlOptions, executor: fromTypeormMysql(dataSource) }),
  });
}
