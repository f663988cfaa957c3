import { TransientStoreError, describeError } from "../../core/errors.js";
import { classifyMysqlError, isMysqlConnectionLoss } from "./classify-mysql-error.js";
import type { MysqlConnection, MysqlPool, MysqlResultHeader, MysqlValue } from "./mysql-store.js";

/**
 * Helpers shared by the MySQL store's parts (store, claim guards, outbox, operations). Internal:
 * not exported from `rabbit-inbox/mysql`.
 */

export type Row = Record<string, unknown>;

/** Runs one statement of the store's own on a connection (with the store's session bookkeeping, where it has some). */
export type MysqlExec = (sql: string, values: MysqlValue[]) => Promise<[unknown, unknown]>;

export function quoteIdent(name: string): string {
  return `\`${name.replace(/`/g, "``")}\``;
}

export function utf8(text: string): Buffer {
  return Buffer.from(text, "utf8");
}

export function headerOf(result: [unknown, unknown]): MysqlResultHeader {
  return result[0] as MysqlResultHeader;
}

export function rowsOf(result: [unknown, unknown]): Row[] {
  return result[0] as Row[];
}

/** VARBINARY columns come back as Buffers, text columns as strings. */
export function textOf(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

export function nullableText(value: unknown): string | null {
  return value === null || value === undefined ? null : textOf(value);
}

/**
 * A DATETIME(6) column as microseconds since the epoch. Every time the store writes is UTC
 * (`UTC_TIMESTAMP(6)`), and reading it as a number keeps it independent of the driver's and the
 * session's time zone settings (mysql2 would read a DATETIME in the process's local zone).
 */
export function micros(column: string): string {
  return `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ${column})`;
}

/** A value of `micros(...)` as a Date (floored to the millisecond). */
export function dateOfMicros(value: unknown): Date {
  return new Date(Math.floor(Number(value) / 1000));
}

export function maybeDateOfMicros(value: unknown): Date | null {
  return value === null || value === undefined ? null : dateOfMicros(value);
}

/**
 * A Date as a UTC DATETIME literal (`2026-01-02 03:04:05.678`), sent as a statement parameter:
 * compared with or stored in a DATETIME(6) column it means the same instant whatever the
 * session's time_zone and the driver's `timezone` option.
 */
export function utcDatetime(date: Date): string {
  return date.toISOString().slice(0, 23).replace("T", " ");
}

/** Rows per statement for key lists: powers of two, so a connection prepares few distinct texts. */
export const KEY_CHUNKS = [64, 32, 16, 8, 4, 2, 1] as const;

/** Splits n items into chunks of the given sizes, largest first, keeping their order. */
export function chunkSizes(n: number, sizes: readonly number[] = KEY_CHUNKS): number[] {
  const out: number[] = [];
  let left = n;
  for (const size of sizes) {
    while (left >= size) {
      out.push(size);
      left -= size;
    }
  }
  return out;
}

/** `items` split into consecutive chunks of `chunkSizes(items.length, sizes)`. */
export function chunked<T>(items: readonly T[], sizes: readonly number[] = KEY_CHUNKS): T[][] {
  const out: T[][] = [];
  let offset = 0;
  for (const size of chunkSizes(items.length, sizes)) {
    out.push(items.slice(offset, offset + size));
    offset += size;
  }
  return out;
}

/** A comma-separated list of integer ids for an `IN (...)`: only safe integers, never text. */
export function idList(ids: readonly number[]): string {
  for (const id of ids) {
    if (!Number.isSafeInteger(id) || id < 0) throw new TypeError(`not a row id: ${String(id)}`);
  }
  return ids.join(", ");
}

/** A pooled connection; failing to get one means the database is unavailable, not that the event is bad. */
export async function acquire<C extends MysqlConnection>(pool: MysqlPool<C>): Promise<C> {
  try {
    return await pool.getConnection();
  } catch (error) {
    const classified = classifyMysqlError(error);
    if (classified !== error) throw classified;
    throw new TransientStoreError(`no MySQL connection: ${describeError(error)}`, { cause: error, kind: "connection" });
  }
}

/** A connection whose session broke is destroyed, never returned to the pool. */
export function giveBack(connection: MysqlConnection, broken: boolean): void {
  if (broken) connection.destroy();
  else connection.release();
}

/** One statement on a pooled connection, outside any explicit transaction. */
export async function runPooled<C extends MysqlConnection>(pool: MysqlPool<C>, sql: string, values: MysqlValue[] = []): Promise<[unknown, unknown]> {
  const connection = await acquire(pool);
  let broken = false;
  try {
    return await connection.execute(sql, values);
  } catch (error) {
    broken = isMysqlConnectionLoss(error);
    throw classifyMysqlError(error);
  } finally {
    giveBack(connection, broken);
  }
}

/**
 * A short READ COMMITTED transaction on a pooled connection: every statement reads the latest
 * committed rows (as PostgreSQL's default), and InnoDB takes no gap locks for its locking reads,
 * so a relay's or an operator's locks never block the consumers' inserts. `SET TRANSACTION`
 * applies to the next transaction only: the pooled session keeps its own level.
 */
export async function readCommitted<C extends MysqlConnection, T>(pool: MysqlPool<C>, work: (connection: C) => Promise<T>): Promise<T> {
  const connection = await acquire(pool);
  let broken = false;
  try {
    await connection.query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
    await connection.query("START TRANSACTION");
    const result = await work(connection);
    await connection.query("COMMIT");
    return result;
  } catch (error) {
    broken = isMysqlConnectionLoss(error);
    if (!broken) await connection.query("ROLLBACK").catch(() => { broken = true; });
    throw classifyMysqlError(error);
  } finally {
    giveBack(connection, broken);
  }
}
