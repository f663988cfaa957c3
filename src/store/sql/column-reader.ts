/**
 * How a dialect's driver hands over column values: the row mappers are written once, and each
 * database says how its text, times and bytes arrive (a Buffer for a MySQL VARBINARY, epoch ms
 * in SQLite, a timestamptz parsed or not by the data layer...).
 */
export interface ColumnReader {
  text(value: unknown): string;
  date(value: unknown): Date;
  bytes(value: unknown): Buffer;
}

export function nullableText(read: ColumnReader, value: unknown): string | null {
  return value === null || value === undefined ? null : read.text(value);
}

export function nullableDate(read: ColumnReader, value: unknown): Date | null {
  return value === null || value === undefined ? null : read.date(value);
}

/** A flag stored as a boolean, 0/1, or "0"/"1" text. */
export function flagOf(value: unknown): boolean {
  return typeof value === "boolean" ? value : Boolean(Number(value));
}
