import type { Knex } from "knex";
import type { PostgresExecutor } from "../store/postgres/executor-store.js";
import { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "../store/postgres/executor-store.js";
import type { PgQueryResult } from "../store/postgres/driver.js";
import { toPositional } from "./placeholders.js";
import { MysqlExecutorStore } from "../store/mysql/executor-store.js";
import { type DataLayerStoreOptions, dataLayerStore } from "./data-layer-store.js";
import { KNEX_INBOX_QUERY_CONTEXT, fromKnexMysql, knexDialectOf } from "./knex-mysql.js";

export { KNEX_INBOX_QUERY_CONTEXT, fromKnexMysql } from "./knex-mysql.js";

/**
 * Knex (client `pg`) as a PostgresExecutor: `knex.transaction()` runs each inbox transaction and
 * the inbox SQL runs through `trx.raw()` with `?` bindings (an array stays one parameter).
 * Knex rethrows node-postgres errors with the statement prefixed to the message; code intact.
 */
export function fromKnex(knex: Knex): PostgresExecutor<Knex.Transaction> {
  return {
    name: "knex",
    transaction: (work) => knex.transaction((trx) => work(trx)),
    async query(text, values, tx) {
      const { texts, values: bindings } = toPositional(text, values);
      // A literal `?` in the SQL would be taken for a binding: escape it.
      const sql = texts.map((part) => part.replaceAll("?", "\\?")).join("?");
      const result = (await (tx ?? knex).raw(sql, bindings as Knex.RawBinding[]).queryContext(KNEX_INBOX_QUERY_CONTEXT)) as Partial<PgQueryResult>;
      const rows = result.rows ?? [];
      return { rows, rowCount: result.rowCount ?? rows.length };
    },
  };
}

/**
 * An inbox store on your Knex instance: handlers get the `Knex.Transaction` as `ctx.tx`, and the
 * inbox record commits or rolls back with what they write through it. PostgreSQL (client `pg`)
 * or MySQL / MariaDB (client `mysql2`), told apart by the client's dialect.
 */
export function knexStore(knex: Knex, options: DataLayerStoreOptions = {}): PostgresExecutorStore<Knex.Transaction> | MysqlExecutorStore<Knex.Transaction> {
  return dataLayerStore(knexDialectOf(knex), options, {
    postgres: (pgOptions: Omit<PostgresExecutorStoreOptions<Knex.Transaction>, "executor">) => new PostgresExecutorStore({ ...pgOptions, executor: fromKnex(knex) }),
    mysql: (mysqlOptions) => new MysqlExecutorStore({ ...mysqlOptions, executor: fromKnexMysql(knex) }),
  });
}
