import type { Kysely, Transaction } from "kysely";
import type { PostgresExecutor } from "../store/postgres/executor-store.js";
import { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "../store/postgres/executor-store.js";
import { MysqlExecutorStore } from "../store/mysql/executor-store.js";
import { type DataLayerStoreOptions, dataLayerStore } from "./data-layer-store.js";
import { executeRaw, fromKyselyMysql, kyselyDialectOf } from "./kysely-mysql.js";

export { fromKyselyMysql } from "./kysely-mysql.js";


/**
 * Kysely (0.28, PostgresDialect) as a PostgresExecutor: `db.transaction().execute()` runs each
 * inbox transaction, and the inbox SQL runs as raw compiled queries through the same connection.
 * Plugins are bypassed for the inbox's own statements (a CamelCasePlugin would rename the columns
 * it reads); the handler's `ctx.tx` is your Transaction, plugins and all.
 */
export function fromKysely<DB>(db: Kysely<DB>): PostgresExecutor<Transaction<DB>> {
  return {
    name: "kysely",
    transaction: (work) => db.transaction().execute(work),
    async query(text, values, tx) {
      const result = await executeRaw(db, tx, text, values);
      return { rows: result.rows, rowCount: result.numAffectedRows === undefined ? result.rows.length : Number(result.numAffectedRows) };
    },
    // Kysely's PostgresDialect rethrows node-postgres errors as they are.
  };
}

/**
 * An inbox store on your Kysely instance: handlers get the Kysely `Transaction` as `ctx.tx`, and
 * the inbox record commits or rolls back with what they write through it. PostgreSQL
 * (PostgresDialect) or MySQL / MariaDB (MysqlDialect), told apart by Kysely's query compiler.
 *
 *     const store = kyselyStore(db);
 *     await store.migrate();
 *     new InboxConsumer({ url, queue, store, handler: { name: "ledger", async handle(event, { tx }) {
 *       await tx.updateTable("accounts").set(...).where(...).execute();
 *     } } });
 */
export function kyselyStore<DB>(
  db: Kysely<DB>,
  options: DataLayerStoreOptions = {},
): PostgresExecutorStore<Transaction<DB>> | MysqlExecutorStore<Transaction<DB>> {
  return dataLayerStore(kyselyDialectOf(db as Kysely<unknown>), options, {
    postgres: (pgOptions: Omit<PostgresExecutorStoreOptions<Transaction<DB>>, "executor">) => new PostgresExecutorStore({ ...pgOptions, executor: fromKysely(db) }),
    mysql: (mysqlOptions) => new MysqlExecutorStore({ ...mysqlOptions, executor: fromKyselyMysql(db) }),
  });
}
