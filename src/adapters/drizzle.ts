import type { SQL, sql as drizzleSql } from "drizzle-orm";
import type { NodePgDatabase } from "drizzle-orm/node-postgres";
import type { PostgresExecutor } from "../store/postgres/executor-store.js";
import { PostgresExecutorStore, type PostgresExecutorStoreOptions } from "../store/postgres/executor-store.js";
import type { PgQueryResult } from "../store/postgres/driver.js";
import { toPositional } from "./placeholders.js";
import { lazyModule } from "./lazy-module.js";

const drizzle = lazyModule<{ sql: typeof drizzleSql }>("drizzle-orm", "rabbit-inbox/drizzle");

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
      const { sql } = await drizzle();
      const { texts, values: ordered } = toPositional(text, values);
      const chunks: SQL[] = [sql.raw(texts[0]!)];
      ordered.forEach((value, i) => chunks.push(sql`${sql.param(value)}`, sql.raw(texts[i + 1]!)));
      const result = (await (tx ?? db).execute(sql.join(chunks))) as Partial<PgQueryResult>;
      const rows = result.rows ?? [];
      return { rows, rowCount: result.rowCount ?? rows.length };
    },
    driverError: (error) => (isDrizzleQueryError(error) ? error.cause : error),
  };
}

/** DrizzleQueryError (drizzle-orm 0.44+) keeps the failed statement and its params, and the driver's error as `cause`. */
function isDrizzleQueryError(error: unknown): error is Error & { cause: unknown } {
  return error instanceof Error && "query" in error && "params" in error && error.cause !== undefined;
}

/**
 * An inbox store on your Drizzle database: handlers get Drizzle's transaction as `ctx.tx`, and
 * the inbox record commits or rolls back with what they write through it.
 */
export function drizzleStore<TSchema extends Record<string, unknown>>(
  db: NodePgDatabase<TSchema>,
  options: Omit<PostgresExecutorStoreOptions<DrizzleTransaction<TSchema>>, "executor"> = {},
): PostgresExecutorStore<DrizzleTransaction<TSchema>> {
  return new PostgresExecutorStore({ ...options, executor: fromDrizzle(db) });
}
