import { boundStatement, drizzleDriverError } from "./drizzle-statement.js";
import type { NodePgDatabase } from "drizzle-orm/node-postgres";
import type { PostgresExecutor } from "../store/postgres/executor-store.js";
import { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "../store/postgres/executor-store.js";
import type { PgQueryResult } from "../store/postgres/driver.js";
import { toPositional } from "./placeholders.js";
import type { MySql2Database } from "drizzle-orm/mysql2";
import { MysqlExecutorStore } from "../store/mysql/executor-store.js";
import { type DataLayerStoreOptions, dataLayerStore } from "./data-layer-store.js";
import { type MySqlDrizzleTransaction, drizzleDialectOf, fromDrizzleMysql } from "./drizzle-mysql.js";

export { type MySqlDrizzleTransaction, fromDrizzleMysql } from "./drizzle-mysql.js";


/** The transaction object `db.transaction()` hands to its callback: what handlers get as `ctx.tx`. */
export type DrizzleTransaction<TSchema extends Record<string, unknown>> = Parameters<Parameters<NodePgDatabase<TSchema>["transaction"]>[0]>[0];

/**
 * Drizzle (drizzle-orm with node-postgres) as a PostgresExecutor: `db.transaction()` runs each
 * inbox transaction, and the inbox SQL runs through `tx.execute()` with each value bound as one
 * parameter (`sql.param`, so an array stays an array). Drizzle wraps driver errors in
 * DrizzleQueryError with the node-postgres error as `cause`.
 */
export function fromDrizzle<TSchema extends Record<string, unknown>>(db: NodePgDatabase<TSchema>): PostgresExecutor<DrizzleTransaction<TSchema>> {
  return {
    name: "drizzle",
    transaction: (work) => db.transaction(work),
    async query(text, values, tx) {
      const { texts, values: ordered } = toPositional(text, values);
      const result = (await (tx ?? db).execute(await boundStatement(texts, ordered))) as Partial<PgQueryResult>;
      const rows = result.rows ?? [];
      return { rows, rowCount: result.rowCount ?? rows.length };
    },
    driverError: drizzleDriverError,
  };
}

/**
 * An inbox store on your Drizzle database: handlers get Drizzle's transaction as `ctx.tx`, and
 * the inbox record commits or rolls back with what they write through it. PostgreSQL
 * (`drizzle-orm/node-postgres`) or MySQL / MariaDB (`drizzle-orm/mysql2`), told apart by
 * Drizzle's database class.
 */
export function drizzleStore<TSchema extends Record<string, unknown>>(
  db: MySql2Database<TSchema>,
  options?: DataLayerStoreOptions,
): MysqlExecutorStore<MySqlDrizzleTransaction<TSchema>>;
export function drizzleStore<TSchema extends Record<string, unknown>>(
  db: NodePgDatabase<TSchema>,
  options?: DataLayerStoreOptions,
): PostgresExecutorStore<DrizzleTransaction<TSchema>>;
export function drizzleStore<TSchema extends Record<string, unknown>>(
  db: NodePgDatabase<TSchema> | MySql2Database<TSchema>,
  options: DataLayerStoreOptions = {},
): PostgresExecutorStore<DrizzleTransaction<TSchema>> | MysqlExecutorStore<MySqlDrizzleTransaction<TSchema>> {
  return dataLayerStore(drizzleDialectOf(db), options, {
    postgres: (pgOptions: Omit<PostgresExecutorStoreOptions<DrizzleTransaction<TSchema>>, "executor">) =>
      new PostgresExecutorStore({ ...pgOptions, executor: fromDrizzle(db as NodePgDatabase<TSchema>) }),
    mysql: (mysqlOptions) => new MysqlExecutorStore({ ...mysqlOptions, executor: fromDrizzleMysql(db as MySql2Database<TSchema>) }),
  });
}
