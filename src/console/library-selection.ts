import { bulkDiscard } from "../quarantine/bulk-discard.js";
import { bulkReplay } from "../quarantine/bulk-replay.js";
import type { QuarantineFilter } from "../quarantine/quarantine-admin.js";
import { quarantineGroups } from "../quarantine/quarantine-groups.js";
import type { ConsoleFilter } from "./console-filter.js";
import type { BulkRequest, QuarantineSelection } from "./quarantine-selection.js";

/** The console's filter as the library's: the stores filter in SQL and page by id. */
function libraryFilter(f: ConsoleFilter, paging: boolean): QuarantineFilter {
  const filter: QuarantineFilter = { status: f.status };
  for (const name of ["handler", "reason", "tenant", "since", "until", "fingerprint", "group", "text"] as const) {
    if (f[name] !== undefined) (filter as Record<string, unknown>)[name] = f[name];
  }
  if (paging) {
    filter.limit = f.limit;
    if (f.afterId !== undefined) filter.afterId = f.afterId;
  }
  return filter;
}

/** A bulk action selects held entries; a dry run records nothing, but the library wants a reason all the same. */
function bulkOptions(r: BulkRequest) {
  return {
    filter: { ...libraryFilter(r.filter, false), status: "held" as const }, actor: r.actor, reason: r.dryRun ? r.reason || "dry run" : r.reason,
    ...(r.limit !== undefined ? { limit: r.limit } : {}), ...(r.dryRun ? { dryRun: true } : {}),
    ...(r.signal ? { signal: r.signal } : {}), ...(r.onProgress ? { onProgress: r.onProgress } : {}),
  };
}

/** The selection over the library's filtered listing, its groups and its bulk operations. */
export const librarySelection: QuarantineSelection = {
  list: (admin, filter) => admin.listQuarantineEntries(libraryFilter(filter, true)),
  groups: (admin, filter) => quarantineGroups(admin, libraryFilter(filter, false)),
  bulkReplay: (admin, publish, r) => bulkReplay(admin, publish, {
    ...bulkOptions(r), ...(r.ratePerSecond !== undefined ? { ratePerSecond: r.ratePerSecond } : {}),
    ...(r.acceptNew ? { acceptNew: true } : {}), ...(r.acceptStale ? { acceptStale: true } : {}),
  }),
  bulkDiscard: (admin, r) => bulkDiscard(admin, bulkOptions(r)),
};
