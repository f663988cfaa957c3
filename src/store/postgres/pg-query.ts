import type { PgQueryResult } from "./postgres-store.js";

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
