import { boundStatement, drizzleDriverError } from "./drizzle-statement.js";
import type { MySql2Database } from "drizzle-orm/mysql2";
import { InboxConfigError } from "../core/errors.js";
import type { SqlExecutor } from "../store/sql/executor-driver.js";
import type { DataLayerDialect } from "./data-layer-store.js";
import { mysqlResultOf } from "./mysql-result.js";


/** The transaction object a mysql2 Drizzle database hands to `db.transaction()`'s callback. */
export type MySqlDrizzleTransaction<TSchema extends Record<string, unknown>> = Parameters<Parameters<MySql2Database<TSchema>["transaction"]>[0]>[0];

/** drizzle-orm's `entityKind` symbol: each of its classes names itself with it. */
const ENTITY_KIND = Symbol.for("drizzle:entityKind");

/** The entity kinds of the instance's class and its ancestors (`MySql2Database`, `MySqlDatabase`). */
function entityKindsOf(instance: object): string[] {
  const kinds: string[] = [];
  for (let type = (instance as { constructor?: unknown }).constructor; typeof type === "function"; type = Object.getPrototypeOf(type) as unknown) {
    const kind = (type as unknown as Record<symbol, unknown>)[ENTITY_KIND];
    if (typeof kind === "string") kinds.push(kind);
  }
  return kinds;
}

/**
 * The database behind a Drizzle instance, from Drizzle's own class names: `drizzle-orm/mysql2`
 * on MySQL / MariaDB, anything else (`drizzle-orm/node-postgres`) on PostgreSQL. Another MySQL
 * driver (PlanetScale, TiDB serverless) returns its results in other shapes: refused.
 */
export function drizzleDialectOf(db: object): DataLayerDialect {
  const kinds = entityKindsOf(db);
  if (kinds.includes("MySql2Database")) return "mysql";
  if (kinds.includes("MySqlDatabase")) {
    throw new InboxConfigError(`drizzleStore runs on MySQL through drizzle-orm/mysql2 only, not ${kinds[0] ?? "this driver"}`);
  }
  return "postgres";
}

/**
 * Drizzle (drizzle-orm with mysql2) as a SqlExecutor on MySQL / MariaDB: `db.transaction()` runs
 * each inbox transaction, and the inbox SQL runs through `tx.execute()`, cut at its `?`
 * placeholders with each value bound as one parameter (`sql.param`), which Drizzle's MySQL
 * dialect writes back as `?`. Drizzle returns mysql2's `[rows, fields]` (the OK packet for a
 * write) and wraps mysql2's errors in DrizzleQueryError with the mysql2 error as `cause`.
 * Only for the inbox's own SQL, which has no `?` in a string literal.
 */
export function fromDrizzleMysql<TSchema extends Record<string, unknown>>(db: MySql2Database<TSchema>): SqlExecutor<MySqlDrizzleTransaction<TSchema>> {
  return {
    name: "drizzle",
    transaction: (work) => db.transaction(work),
    async query(text, values, tx) {
      const texts = text.split("?");
      if (texts.length !== values.length + 1) throw new RangeError(`${texts.length - 1} placeholders for ${values.length} values`);
      const result = (await (tx ?? db).execute(await boundStatement(texts, values))) as unknown;
      return mysqlResultOf(Array.isArray(result) ? result[0] : result);
    },
    driverError: drizzleDriverError,
  };
}
