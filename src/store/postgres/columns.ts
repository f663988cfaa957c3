import type { ColumnReader } from "../sql/column-reader.js";

/**
 * How PostgreSQL's columns arrive, whoever reads them: text as text, bytea as a Buffer
 * (node-postgres) or a Uint8Array (Prisma), a timestamptz as a Date or as PostgreSQL's text.
 */
export const postgresColumns: ColumnReader = {
  text: (value) => String(value),
  date: (value) => timestampOf(value),
  bytes: (value) => bytesOf(value),
};

/** node-postgres gives a Buffer for bytea; Prisma a Uint8Array. */
function bytesOf(value: unknown): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`expected bytea, got ${typeof value}`);
}

/** PostgreSQL's ISO text of a timestamptz: `2026-01-02 03:04:05.678901+00`, offsets may carry minutes (and seconds). */
const TIMESTAMPTZ_TEXT = /^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?$/;

/**
 * A timestamptz as a Date. node-postgres, Kysely, Knex and Prisma parse it; Drizzle's
 * node-postgres session turns the parser off and hands over PostgreSQL's text, which is parsed
 * here exactly (to the millisecond, like node-postgres) rather than by Date's lenient parser.
 */
export function timestampOf(value: unknown): Date {
  if (value instanceof Date) return value;
  const match = typeof value === "string" ? TIMESTAMPTZ_TEXT.exec(value) : null;
  if (!match) throw new TypeError(`expected a timestamptz, got ${JSON.stringify(value)}`);
  const [, year, month, day, hour, minute, second, fraction = "", sign, offsetHours, offsetMinutes = "0", offsetSeconds = "0"] = match;
  const ms = Number(fraction.padEnd(3, "0").slice(0, 3));
  const utc = Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second), ms);
  const offset = (Number(offsetHours) * 3600 + Number(offsetMinutes) * 60 + Number(offsetSeconds)) * 1000;
  return new Date(sign === "-" ? utc + offset : utc - offset);
}
