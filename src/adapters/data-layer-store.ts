import { InboxConfigError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";

/** The databases a data-layer store runs on. */
export type DataLayerDialect = "postgres" | "mysql";

/** Options of `kyselyStore`, `knexStore`, `drizzleStore` and `prismaStore`. */
export interface DataLayerStoreOptions {
  /**
   * The database behind the data layer. Default: detected from the instance (Kysely's query
   * compiler, Knex's client, Drizzle's database class, Prisma's provider); pass it when a custom
   * dialect or driver hides it.
   */
  dialect?: DataLayerDialect;
  /** PostgreSQL: schema of the inbox tables. Default: unqualified names (the connection's search_path). */
  schema?: string;
  /** MySQL / MariaDB: the database holding the inbox tables. Default: the connection's current one. */
  database?: string;
  logger?: Logger;
  /** Most transactions a consumer may run at once; keep it at or below the data layer's pool size. Default 10. */
  maxConcurrentTransactions?: number;
}

/** The store options both dialects share. */
export type CommonStoreOptions = Pick<DataLayerStoreOptions, "logger" | "maxConcurrentTransactions">;

/** How a data layer builds its store on each database; only the chosen dialect's is called. */
export interface DataLayerStores<P, M> {
  postgres: (options: CommonStoreOptions & { schema?: string }) => P;
  mysql: (options: CommonStoreOptions & { database?: string }) => M;
}

/**
 * The store of `options.dialect`, or else of the dialect found on the instance, with the options
 * that dialect takes: `schema` is PostgreSQL's, `database` MySQL's, and the other one is refused
 * rather than ignored (the inbox tables would land somewhere else than meant).
 */
export function dataLayerStore<P, M>(detected: DataLayerDialect, options: DataLayerStoreOptions, stores: DataLayerStores<P, M>): P | M {
  const { dialect = detected, database, schema, ...common } = options;
  if (dialect === "mysql") {
    if (schema !== undefined) throw new InboxConfigError("on MySQL/MariaDB the inbox tables' place is the `database` option, not `schema`");
    return stores.mysql(database === undefined ? common : { ...common, database });
  }
  if (dialect !== "postgres") throw new InboxConfigError(`dialect must be "postgres" or "mysql", not ${JSON.stringify(dialect)}`);
  if (database !== undefined) throw new InboxConfigError("on PostgreSQL the inbox tables' place is the `schema` option, not `database`");
  return stores.postgres(schema === undefined ? common : { ...common, schema });
}
