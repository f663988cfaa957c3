import { existsSync } from "node:fs";
import { describeError } from "../core/errors.js";
import { type Logger, createJsonLogger, redactSecrets } from "../core/logger.js";
import type { DatabaseHealth, Store } from "../core/store-contract/store.js";
import { type DatabaseTarget, databaseTargetOf } from "../store/database-url.js";
import type { InboxOperations } from "../core/store-contract/capabilities.js";
import { openStore } from "../store/open-store.js";
import { CliError } from "./cli-error.js";

/**
 * Where the command looks when neither --database-url nor DATABASE_URL is given: the ledger
 * reference application's default database, relative to the working directory.
 */
export const DEFAULT_DATABASE_URL = "./data/ledger.sqlite";

export interface OpenedDatabase {
  store: Store;
  operations: InboxOperations;
  /** A write the database refuses while it refuses writes, and what the store then knows of it. */
  checkWrites(): Promise<DatabaseHealth>;
  /** The nodes of a URL with a host list (`host:port`, in the order they are tried); absent otherwise. */
  nodes?: string[];
  /** Dialect and location, without credentials. */
  description: string;
  close(): Promise<void>;
}

/** The database URL from the option, then DATABASE_URL, then the documented default. */
export function databaseUrlFrom(option: string | undefined): string {
  return option?.trim() || process.env.DATABASE_URL?.trim() || DEFAULT_DATABASE_URL;
}

/**
 * Opens the inbox database named like the ledger's DATABASE_URL (see openStore). An SQLite file
 * must exist unless `create` (migrate): a typo should not produce an empty database.
 */
export async function openDatabase(url: string, options: { create?: boolean } = {}): Promise<OpenedDatabase> {
  // Library logs would interleave with the command's output; only real trouble is shown.
  const logger: Logger = createJsonLogger({ name: "rabbit-inbox", level: "error" });
  let target: DatabaseTarget;
  try {
    target = databaseTargetOf(url);
  } catch (error) {
    throw new CliError(describeError(error), 2);
  }
  if (target.kind === "sqlite" && !options.create && !existsSync(target.address)) {
    throw new CliError(`no SQLite database at ${target.address}: check --database-url / DATABASE_URL, or create it with rabbit-inbox migrate`, 2);
  }
  const store = await openStore(url, { logger, poolSize: 4 }).catch((error: unknown) => { throw namedUrlError(error, url); });
  return {
    store, operations: store.operations(), checkWrites: () => store.checkWrites(), description: target.description,
    ...(target.nodes ? { nodes: target.nodes } : {}), close: () => store.close(),
  };
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
/**
 * An operator command's usual start: the database named by `--database-url`, `DATABASE_URL` or
 * the default, refused with the fix when its schema is behind this build of the library.
 */
export function withCurrentSchema<T>(databaseUrl: string | undefined, work: (db: OpenedDatabase) => Promise<T>): Promise<T> {
  return withDatabase(databaseUrlFrom(databaseUrl), async (db) => {
    await requireCurrentSchema(db.operations);
    return work(db);
  });
}

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
