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
