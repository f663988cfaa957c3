import { FILTER_TEXT_FIELDS, type FilterText, FilterTextError, filterFromText } from "../quarantine/filter-text.js";
import type { QuarantineFilter, QuarantineStatus } from "../core/store-contract/quarantine-admin.js";
import { invalidField } from "./console-request-error.js";
import { type Schema, type Source, oneOf, positiveInteger, schema, text, withDefault } from "./request-schema.js";

/**
 * What the console selects quarantine entries by: the list, the groups and the bulk actions
 * share it. The library's filter, with the status and the page size always set.
 */
export type ConsoleFilter = Omit<QuarantineFilter, "status" | "limit" | "pendingReplay"> & {
  status: QuarantineStatus | "all";
  limit: number;
};

export const PAGE_SIZE = 50;
const MAX_PAGE = 500;

/** The filter's fields as text, from a query string or a form: what links and hidden fields carry. */
export const FILTER_FIELDS = ["status", ...FILTER_TEXT_FIELDS] as const;

const PAGE = schema({
  status: withDefault(oneOf(["held", "replayed", "discarded", "all"]), "held"),
  limit: withDefault(positiveInteger({ max: MAX_PAGE }), PAGE_SIZE),
  after: positiveInteger(),
});

/**
 * Reads a filter from text fields (a query string, a form or a JSON object); empty fields are
 * absent. The selection fields read as the command's flags do (`filterFromText`): the same
 * times (ISO, or a duration ago such as `2h`), the same checks. `prefix` names the fields in
 * messages when the filter sits in a field of its own (`filter.since`).
 */
export function parseFilter(source: Source, now: Date = new Date(), prefix = ""): ConsoleFilter {
  const { status, limit, after } = PAGE.parse(source, prefix);
  const typed: FilterText = {};
  for (const name of FILTER_TEXT_FIELDS) {
    const value = text()(source, name, `${prefix}${name}`);
    if (value !== undefined) typed[name] = value;
  }
  let selection: QuarantineFilter;
  try {
    selection = filterFromText(typed, now, (field) => `${prefix}${field}`);
  } catch (error) {
    if (error instanceof FilterTextError) throw invalidField(`${prefix}${error.field}`, error.message);
    throw error;
  }
  const filter: ConsoleFilter = { ...selection, status, limit };
  if (after !== undefined) filter.afterId = after;
  return filter;
}

/** The filter as a request schema: a route's query, or a bulk action's `filter` field. */
export const FILTER: Schema<ConsoleFilter> = {
  names: [...PAGE.names, ...FILTER_TEXT_FIELDS],
  parse: (source, prefix) => parseFilter(source, new Date(), prefix),
};

/** The filter as text fields again (without paging), for links and hidden form fields. */
export function filterFields(filter: ConsoleFilter): Record<(typeof FILTER_FIELDS)[number], string | undefined> {
  return {
    status: filter.status, handler: filter.handler, reason: filter.reason, tenant: filter.tenant,
    since: filter.since?.toISOString(), until: filter.until?.toISOString(), fingerprint: filter.fingerprint, group: filter.group, text: filter.text,
  };
}
