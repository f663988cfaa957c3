/**
 * Writing results: JSON for machines (`--json`), aligned text for people. Everything goes out
 * with its control characters escaped (message bodies, ids and reasons are producer-controlled
 * and must not drive the operator's terminal).
 */
import { escapeControlCharacters, escapeJsonControlCharacters } from "../core/control-characters.js";

export function printJson(value: unknown): void {
  process.stdout.write(escapeJsonControlCharacters(JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v), 2)) + "\n");
}

export function printLine(text = ""): void {
  process.stdout.write(escapeControlCharacters(text) + "\n");
}

/** A remark for the operator that is not the result itself (stderr, so stdout stays the result). */
export function printNote(text: string): void {
  process.stderr.write(`note: ${escapeControlCharacters(text)}\n`);
}

export function iso(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}

/** Columns padded to their widest cell (escaped first, so the columns line up); the last column is not padded. */
export function printTable(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number | null>>): void {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null ? "-" : escapeControlCharacters(String(c)))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  for (const row of cells) {
    printLine(row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join("  ").trimEnd());
  }
}

/** Shortens text for a table cell. */
export function clip(text: string, max = 60): string {
  const flat = text.replace(/\s+/g, " ");
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
