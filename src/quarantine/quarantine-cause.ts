import { createHash } from "node:crypto";

/**
 * How much of an error text decides its group. The databases compare this prefix (a GROUP BY
 * on whole texts of any length would be slow, and MariaDB only sorts by a prefix anyway), so the
 * same prefix is normalised here, counted in characters as the databases count them.
 */
export const CAUSE_PREFIX_CHARS = 1000;

/** A normalised cause is clipped here: long enough to read, short enough for a group list. */
const CAUSE_MAX_CHARS = 300;

// Order matters: a timestamp or a uuid is made of numbers, a quoted value may hold any of them.
const REPLACEMENTS: ReadonlyArray<[RegExp, string]> = [
  [/"(?:[^"\\]|\\.)*"/g, '"…"'],
  [/'(?:[^'\\]|\\.)*'/g, "'…'"],
  [/`[^`]*`/g, "`…`"],
  [/\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?/g, "<time>"],
  [/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, "<uuid>"],
  // Hashes, fingerprints, object ids: long runs of hex digits with at least one digit.
  [/\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b/gi, "<hex>"],
  [/\d+(?:\.\d+)?/g, "<n>"],
];

/**
 * The error text of a quarantine entry with what differs from one event to the next taken out
 * (quoted values, timestamps, uuids, hashes, numbers, and so the digits of ids like `e-17`), so
 * that one failure seen on thousands of events reads as one cause. Whitespace runs become one
 * space. Pure: the same text always gives the same cause.
 */
export function normaliseCause(detail: string): string {
  let text = Array.from(detail).slice(0, CAUSE_PREFIX_CHARS).join("");
  for (const [pattern, replacement] of REPLACEMENTS) text = text.replace(pattern, replacement);
  text = text.replace(/\s+/g, " ").trim();
  const chars = Array.from(text);
  return chars.length > CAUSE_MAX_CHARS ? `${chars.slice(0, CAUSE_MAX_CHARS - 1).join("")}…` : text;
}

/**
 * A group's key: a short hash of handler, reason and normalised cause. Stable across runs,
 * processes and databases, so it can be kept in a link or passed back as a filter. The three
 * are hashed as a JSON array: no handler or reason text can make two groups collide by shifting
 * a separator.
 */
export function groupKeyOf(handler: string, reason: string, cause: string): string {
  return createHash("sha256").update(JSON.stringify([handler, reason, cause])).digest("hex").slice(0, 16);
}

/** The group key of an entry, from its handler, reason and error text. */
export function groupKeyOfEntry(entry: { handler: string; reason: string; detail: string }): string {
  return groupKeyOf(entry.handler, entry.reason, normaliseCause(entry.detail));
}
