import { FILTER_TEXT_FIELDS, type FilterText, FilterTextError, filterFromText } from "../quarantine/filter-text.js";
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
export const FILTER_FIELDS = ["status", ...FILTER_TEXT_FIELDS] as const;

/**
 * Reads a filter from text fields (a query string, a form or a JSON object); empty fields are
 * absent. The selection fields read as the command's flags do (`filterFromText`): the same
 * times (ISO, or a duration ago such as `2h`), the same checks.
 */
export function parseFilter(fields: (name: string) => unknown, now: Date = new Date()): ConsoleFilter {
  const text = (name: string): string | undefined => {
    const value = fields(name);
    if (value === undefined || value === null) return undefined;
    if (typeof value !== "string" && typeof value !== "number") throw new ConsoleRequestError(`${name} must be text`);
    const trimmed = String(value).trim();
    return trimmed === "" ? undefined : trimmed;
  };
  const status = text("status") ?? "held";
  if (!STATUSES.has(status)) throw new ConsoleRequestError(`status must be held, replayed, discarded or all, not ${JSON.stringify(status)}`);
  const limit = positive(text("limit"), "limit") ?? PAGE_SIZE;
  if (limit > MAX_PAGE) throw new ConsoleRequestError(`limit is at most ${MAX_PAGE}`);
  const typed: FilterText = {};
  for (const name of FILTER_TEXT_FIELDS) {
    const value = text(name);
    if (value !== undefined) typed[name] = value;
  }
  let selection;
  try {
    selection = filterFromText(typed, now);
  } catch (error) {
    if (error instanceof FilterTextError) throw new ConsoleRequestError(error.message);
    throw error;
  }
  const filter: ConsoleFilter = { ...selection, status: status as ConsoleFilter["status"], limit };
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

/**
 * A positive integer parameter (`limit`, `before`, `after`), absent when empty; anything else is
 * the caller's mistake (a 400 naming the parameter), never a value passed on to the database.
 */
export function positiveParam(query: URLSearchParams, name: string, max?: number): number | undefined {
  const value = positive(query.get(name)?.trim() || undefined, name);
  if (max !== undefined && value !== undefined && value > max) throw new ConsoleRequestError(`${name} is at most ${max}`);
  return value;
}

function positive(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new ConsoleRequestError(`${name} must be a positive integer, not ${JSON.stringify(value)}`);
  return n;
}
