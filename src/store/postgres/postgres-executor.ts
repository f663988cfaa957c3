import type { PgQueryResult } from "./store.js";

/**
 * What a data layer (Kysely, Knex, Drizzle, Prisma...) lends the inbox so that the inbox record
 * is written through the user's own transaction: pg-boss's `executeSql`, plus the transaction
 * itself. `rabbit-inbox/kysely`, `/knex`, `/drizzle` and `/prisma` implement it; another data
 * layer on PostgreSQL needs these three members and nothing else.
 */
export interface PostgresExecutor<Tx> {
  /** `kysely`, `knex`, `drizzle`, `prisma`...: for logs and messages. */
  readonly name: string;
  /**
   * Runs `work` in one transaction of the data layer: COMMIT when `work` resolves, ROLLBACK when
   * it throws, and the same error rethrown. The transaction runs at the database's default
   * isolation (READ COMMITTED is what the claim expects).
   */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Runs one statement with `$1`-style placeholders inside `tx`, or on its own (autocommit) when
   * `tx` is undefined. Rows come back as objects keyed by column name, untransformed.
   */
  query(text: string, values: readonly unknown[], tx?: Tx): Promise<PgQueryResult>;
  /**
   * The node-postgres error inside the data layer's wrapper (or a stand-in carrying its SQLSTATE
   * `code` and message), so classifyPostgresError can read it. Undefined: errors are not wrapped.
   */
  driverError?(error: unknown): unknown;
}
