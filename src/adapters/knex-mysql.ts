import type { Knex } from "knex";
import type { SqlExecutor } from "../store/sql/executor-driver.js";
import type { DataLayerDialect } from "./data-layer-store.js";
import { mysqlResultOf } from "./mysql-result.js";

/**
 * The `queryContext` of the inbox's own statements. Knex passes every response, raw ones too,
 * through the `postProcessResponse` of your config: if yours renames columns (camelCase), return
 * the response unchanged when `queryContext?.rabbitInbox` is true.
 */
export const KNEX_INBOX_QUERY_CONTEXT = { rabbitInbox: true } as const;

/** Knex's name for the SQL its client speaks: `mysql` for its mysql, mysql2 and mariadb clients. */
export function knexDialectOf(knex: Knex): DataLayerDialect {
  const client = (knex as { client?: { dialect?: unknown } }).client;
  return client?.dialect === "mysql" ? "mysql" : "postgres";
}

/**
 * Knex (client `mysql2`) as a SqlExecutor on MySQL / MariaDB: `knex.transaction()` runs each
 * inbox transaction, and the inbox SQL runs through `trx.raw()` as it is: its `?` placeholders
 * are Knex's own bindings. Knex returns mysql2's `[rows, fields]` for a raw statement (the OK
 * packet with affectedRows and insertId for a write) and rethrows mysql2's errors with the
 * statement prefixed to the message, errno and code intact.
 */
export function fromKnexMysql(knex: Knex): SqlExecutor<Knex.Transaction> {
  return {
    name: "knex",
    transaction: (work) => knex.transaction((trx) => work(trx)),
    async query(text, values, tx) {
      const response = (await (tx ?? knex).raw(text, values as Knex.RawBinding[]).queryContext(KNEX_INBOX_QUERY_CONTEXT)) as unknown;
      return mysqlResultOf(Array.isArray(response) ? response[0] : response);
    },
  };
}
