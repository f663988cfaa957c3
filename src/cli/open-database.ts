import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { type Logger, createJsonLogger, redactSecrets } from "../core/logger.js";
import type { Store } from "../core/store.js";
import type { InboxOperations } from "../store/operations.js";
import { MysqlStore } from "../store/mysql/store.js";
import { PostgresStore } from "../store/postgres/postgres-store.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { CliError } from "./cli-error.js";

/**
 * Where the command looks when neither --database-url nor DATABASE_URL is given: the ledger
 * reference application's default database, relative to the working directory.
 */
export const DEFAULT_DATABASE_URL = "./data/ledger.sqlite";

export interface OpenedDatabase {
  store: Store;
  operations: InboxOperations;
  /** Dialect and location, without credentials. */
  description: string;
  close(): Promise<void>;
}

/** The database URL from the option, then DATABASE_URL, then the documented default. */
export function databaseUrlFrom(option: string | undefined): string {
  return option?.trim() || process.env.DATABASE_URL?.trim() || DEFAULT_DATABASE_URL;
}

/**
 * Opens the inbox database named like the ledger's DATABASE_URL: `postgres://` or
 * `postgresql://`, `mysql://` or `mariadb://`, or an SQLite file (`sqlite:<path>`, `file:<path>`
 * or a bare path). An SQLite file must exist unless `create` (migrate): a typo should not
 * produce an empty database.
 */
export async function openDatabase(url: string, options: { create?: boolean } = {}): Promise<OpenedDatabase> {
  // Library logs would interleave with the command's output; only real trouble is shown.
  const logger: Logger = createJsonLogger({ name: "rabbit-inbox", level: "error" });
  if (/^postgres(ql)?:\/\//i.test(url)) {
    const store = await PostgresStore.connect(url, { logger, poolSize: 4 }).catch((error: unknown) => { throw namedUrlError(error, url); });
    return { store, operations: store.operations(), description: `postgres ${redactSecrets(url)}`, close: () => store.close() };
  }
  if (/^(mysql|mariadb):\/\//i.test(url)) {
    const store = await MysqlStore.connect(url.replace(/^mariadb:/i, "mysql:"), { logger, poolSize: 4 }).catch((error: unknown) => { throw namedUrlError(error, url); });
    return { store, operations: store.operations(), description: `mysql ${redactSecrets(url)}`, close: () => store.close() };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url) && !/^(sqlite|file):/i.test(url)) {
    throw new CliError(`database URL ${redactSecrets(url)}: unsupported scheme (use postgres://..., mysql://... or an SQLite file path)`, 2);
  }
  const file = resolve(url.replace(/^(sqlite|file):(\/\/)?/i, ""));
  if (!existsSync(file)) {
    if (!options.create) throw new CliError(`no SQLite database at ${file}: check --database-url / DATABASE_URL, or create it with rabbit-inbox migrate`, 2);
    mkdirSync(dirname(file), { recursive: true });
  }
  const store = await SqliteStore.open(file, { logger });
  return { store, operations: store.operations(), description: `sqlite ${file}`, close: () => store.close() };
}

/**
 * A URL the driver cannot parse ("Invalid URL", usually an unencoded character in the password)
 * as a usage error that names where the URL came from; any other error as it is.
 */
export function namedUrlError(error: unknown, url: string): unknown {
  let invalid = false;
  for (let e: unknown = error, depth = 0; e && depth < 5 && !invalid; e = (e as { cause?: unknown }).cause, depth++) {
    invalid = (e as { code?: unknown }).code === "ERR_INVALID_URL" || (e instanceof Error && /^invalid url$/i.test(e.message));
  }
  if (!invalid) return error;
  const source = process.env.DATABASE_URL?.trim() === url ? "DATABASE_URL" : "--database-url";
  return new CliError(`${source} is not a valid URL (${redactSecrets(url)}): percent-encode @ : / ? # in the user or password (%40 %3A %2F %3F %23)`, 2);
}

/** Runs `work` with the database open, and always closes it. */
export async function withDatabase<T>(url: string, work: (db: OpenedDatabase) => Promise<T>, options: { create?: boolean } = {}): Promise<T> {
  const db = await openDatabase(url, options);
  try {
    return await work(db);
  } catch (error) {
    // node-postgres parses its URL only when the pool opens its first connection.
    throw namedUrlError(error, url);
  } finally {
    await db.close();
  }
}

/** Missing migrations, highest known version. */
export async function schemaState(operations: InboxOperations): Promise<{ applied: number[]; latest: number; missing: number[] }> {
  const applied = await operations.appliedMigrations();
  const known = operations.migrations.map((m) => m.version);
  const done = new Set(applied);
  return { applied, latest: Math.max(...known), missing: known.filter((v) => !done.has(v)).sort((a, b) => a - b) };
}

/** Refuses to work on a schema this build does not match; the fix is one command. */
export async function requireCurrentSchema(operations: InboxOperations): Promise<void> {
  const state = await schemaState(operations);
  if (state.missing.length > 0) {
    throw new CliError(
      state.applied.length === 0
        ? "the database has no rabbit-inbox tables: run rabbit-inbox migrate (with the same --database-url)"
        : `the database schema lacks migration${state.missing.length > 1 ? "s" : ""} ${state.missing.join(", ")}: run rabbit-inbox migrate`,
      2,
    );
  }
}
