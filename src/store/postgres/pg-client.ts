import { classifyPostgresError, isPostgresConnectionLoss } from "./errors.js";
import type { PgClient, PgPool, PgQueryResult } from "./store.js";

/**
 * One statement with `$1`-style placeholders. `name` lets node-postgres prepare it once per
 * connection; a data layer's executor (Kysely, Knex, Drizzle, Prisma) ignores it.
 */
export interface PgStatement {
  name?: string;
  text: string;
  values: unknown[];
}

/**
 * Runs one statement on the connection (and inside the transaction) the caller holds: a pooled
 * pg client for PostgresStore, the data layer's transaction for PostgresExecutorStore. The inbox
 * SQL is written once against this, whoever owns the connection.
 */
export type PgQuery = (statement: PgStatement) => Promise<PgQueryResult>;

/**
 * Runs `SAVEPOINT <name>` then the statement, in one round trip where the connection allows it
 * (PostgresStore: one simple query, the parameters inlined as literals), and gives the
 * statement's result. A statement that fails leaves the transaction usable through
 * `ROLLBACK TO SAVEPOINT <name>`.
 */
export type PgQueryInSavepoint = (savepoint: string, statement: PgStatement) => Promise<PgQueryResult>;

/**
 * One statement on a client borrowed from the pool, outside any transaction: errors classified,
 * and a client whose session broke destroyed rather than returned to the pool.
 */
export async function queryOnPool<C extends PgClient>(pool: PgPool<C>, text: string, values: unknown[] = []): Promise<PgQueryResult> {
  let client: C;
  try {
    client = await pool.connect();
  } catch (error) {
    throw classifyPostgresError(error);
  }
  let broken = false;
  try {
    return await client.query(text, values);
  } catch (error) {
    broken = isPostgresConnectionLoss(error);
    throw classifyPostgresError(error);
  } finally {
    client.release(broken);
  }
}
