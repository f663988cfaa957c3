import type { CompiledQuery, Kysely, QueryResult, Transaction } from "kysely";
import type { SqlExecutor } from "../store/sql/executor-driver.js";
import type { DataLayerDialect } from "./data-layer-store.js";
import { lazyModule } from "./lazy-module.js";

const kysely = lazyModule<{ CompiledQuery: typeof CompiledQuery }>("kysely", "rabbit-inbox/kysely");

/**
 * One of the inbox's statements as a raw compiled query, with plugins bypassed (a
 * CamelCasePlugin would rename the columns the inbox reads); the handler's `ctx.tx` keeps them.
 */
export async function executeRaw<DB>(db: Kysely<DB>, tx: Transaction<DB> | undefined, text: string, values: readonly unknown[]): Promise<QueryResult<Record<string, unknown>>> {
  const { CompiledQuery } = await kysely();
  return (tx ?? db).withoutPlugins().executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, [...values]));
}

/**
 * The database behind a Kysely instance, read from what its query compiler writes: MySQL's
 * quotes identifiers with backticks, PostgreSQL's (and SQLite's) with double quotes. Public API
 * only (no adapter class name), so a third-party MySQL dialect that reuses Kysely's compiler is
 * recognised too.
 */
export function kyselyDialectOf(db: Kysely<unknown>): DataLayerDialect {
  const probe = (db as unknown as Kysely<Record<string, Record<string, unknown>>>).withoutPlugins()
    .selectFrom("rabbit_inbox_probe").selectAll().compile().sql;
  return probe.includes("`rabbit_inbox_probe`") ? "mysql" : "postgres";
}

/**
 * Kysely (0.28, MysqlDialect) as a SqlExecutor on MySQL / MariaDB: `db.transaction().execute()`
 * runs each inbox transaction, and the inbox SQL, with its `?` placeholders as they are, runs as
 * raw compiled queries on `tx.withoutPlugins()`. Kysely's MysqlDialect reports the OK packet's
 * affectedRows as `numAffectedRows` (and its insert id) and rethrows mysql2's errors (errno, code) unwrapped.
 */
export function fromKyselyMysql<DB>(db: Kysely<DB>): SqlExecutor<Transaction<DB>> {
  return {
    name: "kysely",
    transaction: (work) => db.transaction().execute(work),
    async query(text, values, tx) {
      const result = await executeRaw(db, tx, text, values);
      if (result.numAffectedRows === undefined) return { rows: result.rows, rowCount: result.rows.length };
      // Kysely reports an OK packet's insert id only when it is not 0.
      return { rows: result.rows, rowCount: Number(result.numAffectedRows), insertId: result.insertId === undefined ? 0 : Number(result.insertId) };
    },
  };
}
