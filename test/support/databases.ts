import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mysql from "mysql2/promise";
import pg from "pg";
import { PostgresStore } from "../../src/store/postgres/index.js";
import { type SqliteOpenOptions, SqliteStore } from "../../src/store/sqlite/index.js";
import type { TestDatabaseKind } from "./test-databases.js";

/**
 * Isolated databases for tests: a PostgreSQL schema, a MySQL/MariaDB database or an SQLite file
 * per test, each with a random name and a function that removes it.
 */

/** Override with TEST_PG_URL. `postgres` (and `root`) both work with trust auth on the test machines. */
export const pgUrl = process.env.TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
/** Override with TEST_MYSQL_URL. */
export const mysqlUrl = process.env.TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test";
/** `host:port` of the tests' PostgreSQL, as the store names a node in its logs and errors. */
export const pgNode = `${new URL(pgUrl).hostname}:${new URL(pgUrl).port || "5432"}`;
/** `text` escaped for use inside a regular expression. */
export function regexText(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

export function randomName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString("hex")}`;
}

export interface TestPgSchema {
  schema: string;
  /** Connection string whose sessions have `search_path` set to the schema (libpq `options`). */
  url: string;
  drop(): Promise<void>;
}

/** Returns `base` with `-c search_path=<schema>` added to its libpq `options` parameter. */
export function withSearchPath(base: string, schema: string): string {
  const url = new URL(base);
  const existing = url.searchParams.get("options");
  url.searchParams.set("options", `${existing ? existing + " " : ""}-c search_path=${schema}`);
  return url.toString();
}

async function withPgClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Creates an empty schema with a random name (lower case: no quoting needed anywhere). */
export async function createPgSchema(base: string = pgUrl): Promise<TestPgSchema> {
  const schema = randomName("ri_test");
  await withPgClient(base, (c) => c.query(`CREATE SCHEMA ${schema}`));
  return {
    schema,
    url: withSearchPath(base, schema),
    drop: () => withPgClient(base, (c) => c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)).then(() => undefined),
  };
}

/** Opens a store (with its own pool) on a connection string, e.g. a TestPgSchema's url. */
export function openPostgresStore(url: string, options: { poolSize?: number } = {}): Promise<PostgresStore> {
  return PostgresStore.connect(url, options);
}

export interface TestSqliteFile {
  /** Path of the database file, in a fresh directory under os.tmpdir(). */
  file: string;
  /** Removes the directory, the file and its -wal / -shm companions. */
  remove(): Promise<void>;
}

export async function createSqliteFile(): Promise<TestSqliteFile> {
  const dir = await mkdtemp(join(tmpdir(), "rabbit-inbox-test-"));
  return { file: join(dir, "inbox.sqlite"), remove: () => rm(dir, { recursive: true, force: true }) };
}

export function openSqliteStore(file: string, options: SqliteOpenOptions = {}): Promise<SqliteStore> {
  return SqliteStore.open(file, options);
}

export interface TestMysqlDatabase {
  database: string;
  /** `TEST_MYSQL_URL` with the path replaced by the new database. */
  url: string;
  drop(): Promise<void>;
}

async function withMysql<T>(url: string, work: (connection: mysql.Connection) => Promise<T>): Promise<T> {
  const connection = await mysql.createConnection(url);
  try {
    return await work(connection);
  } finally {
    await connection.end();
  }
}

/**
 * Creates an empty database with a random name and the server's default character set and
 * collation, on purpose: a store must declare the collation its keys need (binary, so that
 * `E-1` and `e-1` stay two events) instead of relying on the database's default.
 */
export async function createMysqlDatabase(base: string = mysqlUrl): Promise<TestMysqlDatabase> {
  const database = randomName("ri_test");
  await withMysql(base, (c) => c.query(`CREATE DATABASE ${database}`));
  const url = new URL(base);
  url.pathname = `/${database}`;
  return {
    database,
    url: url.toString(),
    drop: () => withMysql(base, (c) => c.query(`DROP DATABASE IF EXISTS ${database}`)).then(() => undefined),
  };
}


/**
 * A new, empty database of the kind, as the DATABASE_URL the ledger and the `rabbit-inbox`
 * command take: a PostgreSQL schema (search_path in the URL), a MariaDB database, or an SQLite
 * path not created yet. `remove` drops it.
 */
export async function createEmptyDatabase(kind: TestDatabaseKind): Promise<{ url: string; remove: () => Promise<void> }> {
  if (kind === "postgres") {
    const schema = await createPgSchema();
    return { url: schema.url, remove: () => schema.drop() };
  }
  if (kind === "mysql") {
    const database = await createMysqlDatabase();
    return { url: database.url, remove: () => database.drop() };
  }
  const file = await createSqliteFile();
  return { url: file.file, remove: () => file.remove() };
}
