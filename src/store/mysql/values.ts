import type { ColumnReader } from "../sql/column-reader.js";

/**
 * How the MySQL store's values cross the wire, shared by its statements (claim, inbox, outbox,
 * operations, migrations). Internal: not exported from `rabbit-inbox/mysql`.
 */

export function quoteIdent(name: string): string {
  return `\`${name.replace(/`/g, "``")}\``;
}

/** Key columns are VARBINARY: the store sends them as UTF-8 bytes, whatever the connection's character set. */
export function utf8(text: string): Buffer {
  return Buffer.from(text, "utf8");
}

/** VARBINARY columns come back as Buffers, text columns as strings. */
export function textOf(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
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
 * The shared row mappers' view of MySQL columns: text as strings or UTF-8 bytes, times as the
 * microseconds that `micros(...)` selects under the column's own name, bodies as bytes.
 */
export const mysqlColumns: ColumnReader = {
  text: textOf,
  date: dateOfMicros,
  bytes: (value) => (Buffer.isBuffer(value) ? value : Buffer.from(textOf(value), "utf8")),
};

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

/**
 * A listing's row limit, inlined into the text: a prepared `LIMIT ?` rejects mysql2's numeric
 * parameters on MySQL 8.0.22+. Every LIMIT the store sends is inlined for that reason.
 */
export function listingLimit(limit: number): number {
  return Math.max(0, Math.min(Math.trunc(limit), 1_000_000));
}
