import { utcUnlessZoned } from "../quarantine/filter-time.js";
import type { QuarantineFilter, QuarantineStatus } from "../quarantine/quarantine-admin.js";

/**
 * What the console selects quarantine entries by: the list, the groups and the bulk actions
 * share it. The library's filter, with the status and the page size always set.
 */
export type ConsoleFilter = Omit<QuarantineFilter, "status" | "limit" | "pendingReplay"> & {
  status: QuarantineStatus | "all";
  limit: number;
};

/** A request the console cannot serve as asked; the message says what to fix. */
export class ConsoleRequestError extends Error {
  constructor(message: string, readonly status = 400) {
    super(message);
    this.name = "ConsoleRequestError";
  }
}

const STATUSES = new Set(["held", "replayed", "discarded", "all"]);
export const PAGE_SIZE = 50;
const MAX_PAGE = 500;

/** The filter's fields as text, from a query string or a form: what links and hidden fields carry. */
export const FILTER_FIELDS = ["status", "handler", "reason", "tenant", "since", "until", "fingerprint", "group", "text"] as const;

/** Reads a filter from text fields (a query string, a form or a JSON object); empty fields are absent. */
export function parseFilter(fields: (name: string) => unknown): ConsoleFilter {
  const text = (name: string): string | undefined => {
    const value = fields(name);
    if (value === undefined || value === null) return undefined;
    if (typeof value !== "string" && typeof value !== "number") throw new ConsoleRequestError(`${name} must be text`);
    const trimmed = String(value).trim();
    return trimmed === "" ? undefined : trimmed;
  };
  const status = text("status") ?? "held";
  if (!STATUSES.has(status)) throw new ConsoleRequestError(`status must be held, replayed, discarded or all, not ${JSON.stringify(status)}`);
  const filter: ConsoleFilter = { status: status as ConsoleFilter["status"], limit: positive(text("limit"), "limit") ?? PAGE_SIZE };
  if (filter.limit > MAX_PAGE) throw new ConsoleRequestError(`limit is at most ${MAX_PAGE}`);
  for (const name of ["handler", "reason", "tenant", "fingerprint", "group", "text"] as const) {
    const value = text(name);
    if (value !== undefined) filter[name] = value;
  }
  const since = date(text("since"), "since");
  const until = date(text("until"), "until");
  if (since) filter.since = since;
  if (until) filter.until = until;
  const after = positive(text("after"), "after");
  if (after !== undefined) filter.afterId = after;
  return filter;
}

/** The filter as text fields again (without paging), for links and hidden form fields. */
export function filterFields(filter: ConsoleFilter): Record<(typeof FILTER_FIELDS)[number], string | undefined> {
  return {
    status: filter.status, handler: filter.handler, reason: filter.reason, tenant: filter.tenant,
    since: filter.since?.toISOString(), until: filter.until?.toISOString(), fingerprint: filter.fingerprint, group: filter.group, text: filter.text,
  };
}

function positive(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new ConsoleRequestError(`${name} must be a positive integer, not ${JSON.stringify(value)}`);
  return n;
}

function date(value: string | undefined, name: string): Date | undefined {
  if (value === undefined) return undefined;
  const d = new Date(utcUnlessZoned(value));
  if (Number.isNaN(d.getTime())) throw new ConsoleRequestError(`${name} must be a date and time (ISO 8601, e.g. 2026-12-01T10:00:00Z), not ${JSON.stringify(value)}`);
  return d;
}
