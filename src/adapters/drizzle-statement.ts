import type { SQL, sql as drizzleSql } from "drizzle-orm";
import { lazyModule } from "./lazy-module.js";

const drizzle = lazyModule<{ sql: typeof drizzleSql }>("drizzle-orm", "rabbit-inbox/drizzle");

/**
 * A statement cut at its placeholders (`texts` has one more element than `values`) as Drizzle
 * SQL, each value bound as one parameter (`sql.param`, so an array stays an array); Drizzle's
 * dialect writes the placeholders back in its own style.
 */
export async function boundStatement(texts: readonly string[], values: readonly unknown[]): Promise<SQL> {
  const { sql } = await drizzle();
  const chunks: SQL[] = [sql.raw(texts[0]!)];
  values.forEach((value, i) => chunks.push(sql`${sql.param(value)}`, sql.raw(texts[i + 1]!)));
  return sql.join(chunks);
}

/**
 * Drizzle's DrizzleQueryError (drizzle-orm 0.44+), on every driver, keeps the failed statement
 * and its params, and the driver's error as `cause`: the driver error is what gets classified.
 */
export function isDrizzleQueryError(error: unknown): error is Error & { cause: unknown } {
  return error instanceof Error && "query" in error && "params" in error && error.cause !== undefined;
}

/** The driver's error under a DrizzleQueryError, or the error itself. */
export function drizzleDriverError(error: unknown): unknown {
  return isDrizzleQueryError(error) ? error.cause : error;
}
