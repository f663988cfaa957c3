import { parseDuration } from "../retention/duration.js";
import type { QuarantineFilter } from "../core/store-contract/quarantine-admin.js";

/** The fields of a quarantine filter as an operator types them, on the command line or in the console. */
export const FILTER_TEXT_FIELDS = ["handler", "reason", "tenant", "since", "until", "fingerprint", "group", "text"] as const;

export type FilterTextField = (typeof FILTER_TEXT_FIELDS)[number];

/** A filter as text: each field absent or as typed. */
export type FilterText = Partial<Record<FilterTextField, string>>;

/** A filter field that cannot mean anything; the message names the field as the caller does. */
export class FilterTextError extends Error {
  constructor(readonly field: FilterTextField, message: string) {
    super(message);
    this.name = "FilterTextError";
  }
}

/**
 * Reads a filter typed by an operator, every value checked, the same way wherever it was typed:
 * the command's flags and the console's fields select the same entries and refuse the same
 * mistakes. Values are trimmed; an empty one is refused (a form drops its empty fields first).
 * Times are ISO (UTC unless they carry a zone) or a duration before `now`. `nameOf` says how the
 * caller names a field in messages (`--since` on the command line, `since` in the console).
 */
export function filterFromText(fields: FilterText, now: Date, nameOf: (field: FilterTextField) => string = (field) => field): QuarantineFilter {
  const fail = (field: FilterTextField, message: string): never => {
    throw new FilterTextError(field, `${nameOf(field)} ${message}`);
  };
  const value = (field: FilterTextField): string | undefined => {
    const raw = fields[field];
    if (raw === undefined) return undefined;
    const trimmed = raw.trim();
    return trimmed === "" ? fail(field, "needs a value") : trimmed;
  };
  const filter: QuarantineFilter = {};
  for (const field of ["handler", "reason", "tenant", "text"] as const) {
    const text = value(field);
    if (text !== undefined) filter[field] = text;
  }
  const fingerprint = value("fingerprint");
  if (fingerprint !== undefined) {
    if (!/^[0-9a-f]{64}$/.test(fingerprint)) fail("fingerprint", `must be a SHA-256 in hex (64 characters 0-9a-f), got ${JSON.stringify(fingerprint)}`);
    filter.fingerprint = fingerprint;
  }
  const group = value("group");
  if (group !== undefined) {
    if (!/^[0-9a-f]{16}$/.test(group)) fail("group", `must be a group key (16 characters 0-9a-f, as the groups list shows them), got ${JSON.stringify(group)}`);
    filter.group = group;
  }
  for (const field of ["since", "until"] as const) {
    const text = value(field);
    if (text === undefined) continue;
    const time = timeOf(text, now) ?? fail(field, `takes an ISO time (2026-11-30T06:00:00Z, 2026-11-30) or a duration ago (90m, 2h, 1d), got ${JSON.stringify(text)}`);
    if (time < EARLIEST || time > LATEST) fail(field, `${JSON.stringify(text)} is out of range: times run from 0001-01-01 to 9999-12-31 (UTC)`);
    filter[field] = time;
  }
  if (filter.since && filter.until && filter.since >= filter.until) {
    fail("since", `(${filter.since.toISOString()}) must be before ${nameOf("until")} (${filter.until.toISOString()})`);
  }
  return filter;
}

/**
 * The times a filter may name: what a four-digit ISO year can write, and what every store
 * compares (PostgreSQL refuses a timestamp before 4714 BC, MySQL compares a year below 0 as text).
 */
const EARLIEST = new Date("0001-01-01T00:00:00.000Z");
const LATEST = new Date("9999-12-31T23:59:59.999Z");

/** An ISO 8601 date or time (UTC unless it says otherwise), or a duration before `now`; undefined if neither. */
export function timeOf(text: string, now: Date): Date | undefined {
  if (/^\d+(?:\.\d+)?(?:ms|s|m|h|d|w)/.test(text)) {
    try {
      return new Date(now.getTime() - parseDuration(text));
    } catch {
      return undefined;
    }
  }
  const iso = /^(\d{4})-(\d{2})-(\d{2})(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/.exec(text);
  if (!iso) return undefined;
  // Date rolls a day past the month's end over into the next month (February 30 is March 2).
  const [, year, month, day] = iso.map(Number) as [number, number, number, number];
  if (day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return undefined;
  const date = new Date(utcUnlessZoned(text));
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/**
 * A quarantine filter's time as text `Date` reads: one without a zone (`2026-12-01T10:00`, or
 * what a datetime-local field sends) is UTC, like every time the console and the command print,
 * never the local time of whatever machine parses it. A date alone is already UTC to `Date`.
 */
function utcUnlessZoned(text: string): string {
  const iso = text.replace(" ", "T");
  return /T\d{2}:\d{2}/.test(iso) && !/(?:Z|[+-]\d{2}:?\d{2})$/i.test(iso) ? `${iso}Z` : iso;
}
