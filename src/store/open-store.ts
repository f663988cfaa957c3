import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { InboxConfigError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { redactSecrets } from "../core/redact-secrets.js";
import type { Store } from "../core/store-contract/store.js";
import type { MysqlConnection, MysqlStore } from "./mysql/index.js";
import type { PgClient, PostgresStore } from "./postgres/index.js";
import type { SqliteDatabase, SqliteStore } from "./sqlite/index.js";
import { databaseTargetOf } from "./database-url.js";

/** The transaction handle (`ctx.tx`) of a store openStore can return. */
export type UrlStoreHandle = PgClient | MysqlConnection | SqliteDatabase;

/**
 * A store openStore can return; `dialect` tells which, and narrows the type. It is also a
 * `Store` whose handle is any of the three, so that it goes to an InboxConsumer or an
 * OutboxRelay as it is (a plain union of stores gives the consumer no one Store<Tx> to infer).
 */
export type UrlStore = (PostgresStore | MysqlStore | SqliteStore) & Store<UrlStoreHandle>;

export interface OpenStoreOptions {
  logger?: Logger;
  /** Connections in the pool of a PostgreSQL or MySQL/MariaDB store. Default 10 (SQLite has one connection). */
  poolSize?: number;
  /**
   * PostgreSQL only: the schema of the inbox tables. Default: unqualified names, so the
   * connection's search_path (which a URL can set with `?options=-c%20search_path%3Dapp`).
   */
  schema?: string;
  /** Where the URL came from, named in errors, e.g. `DATABASE_URL`. Default `database URL`. */
  source?: string;
}

/**
 * Opens the store a database URL names: `postgres://` or `postgresql://` (PostgresStore.connect),
 * `mysql://` or `mariadb://` (MysqlStore.connect), or an SQLite file as `sqlite:<path>`,
 * `file:<path>` or a plain path (SqliteStore.open; the file and its directory are created when
 * missing). An unknown scheme is an InboxConfigError that lists the accepted ones, with the
 * URL's password masked.
 *
 * The store's module and its driver (`pg`, `mysql2`, `better-sqlite3`) are loaded only for the
 * database named, so an application needs only the driver it uses. Migrations are not run:
 * call `store.migrate()`.
 */
export async function openStore(url: string, options: OpenStoreOptions = {}): Promise<UrlStore> {
  const source = options.source ?? "database URL";
  const target = databaseTargetOf(url, source);
  if (options.schema !== undefined && target.kind !== "postgres") {
    throw new InboxConfigError(`the schema option applies to PostgreSQL only, and ${source} ${redactSecrets(url.trim())} names ${target.kind === "mysql" ? "MySQL/MariaDB (the database in the URL holds the tables)" : "an SQLite file"}`);
  }
  const logger = options.logger ? { logger: options.logger } : {};
  const poolSize = options.poolSize !== undefined ? { poolSize: options.poolSize } : {};
  if (target.kind === "postgres") {
    const { PostgresStore } = await import("./postgres/index.js");
    return PostgresStore.connect(target.address, { ...logger, ...poolSize, ...(options.schema !== undefined ? { schema: options.schema } : {}) });
  }
  if (target.kind === "mysql") {
    const { MysqlStore } = await import("./mysql/index.js");
    return MysqlStore.connect(target.address, { ...logger, ...poolSize });
  }
  const { SqliteStore } = await import("./sqlite/index.js");
  mkdirSync(dirname(target.address), { recursive: true });
  return SqliteStore.open(target.address, logger);
}
