import type { QuarantineAdmin, QuarantineDetail, QuarantineFilter } from "../core/store-contract/quarantine-admin.js";
import { groupKeyOfEntry } from "./quarantine-cause.js";

/** Rows a store reads per page while it looks for a group's entries. */
const GROUP_SCAN_PAGE = 500;

/**
 * A listing with `filter.group`, for the stores: a group key is a hash of a normalised cause,
 * which SQL cannot compute, so the store's own SQL narrows by every other field and the entries
 * of the group are picked here, page after page (keyset on id), until `limit` are found.
 */
export async function listGroupEntries(filter: QuarantineFilter, listPage: (filter: QuarantineFilter) => Promise<QuarantineDetail[]>): Promise<QuarantineDetail[]> {
  const { group, ...rest } = filter;
  if (group === undefined) return listPage(rest);
  const limit = filter.limit ?? 100;
  const found: QuarantineDetail[] = [];
  let afterId = filter.afterId;
  for (;;) {
    const page = await listPage({ ...rest, limit: GROUP_SCAN_PAGE, ...(afterId === undefined ? {} : { afterId }) });
    for (const entry of page) {
      if (groupKeyOfEntry(entry) !== group) continue;
      found.push(entry);
      if (found.length >= limit) return found;
    }
    if (page.length < GROUP_SCAN_PAGE) return found;
    afterId = page.at(-1)!.id;
  }
}

/**
 * The entries a filter selects, page by page in id order (keyset paging, so entries that leave
 * the selection while it runs do not shift the pages), at most `limit` in all.
 */
export async function* selectQuarantineEntries(admin: QuarantineAdmin, filter: QuarantineFilter, options: { limit?: number; pageSize?: number } = {}): AsyncGenerator<QuarantineDetail> {
  const pageSize = options.pageSize ?? 200;
  let remaining = options.limit ?? Infinity;
  let afterId = filter.afterId;
  while (remaining > 0) {
    const page = await admin.listQuarantineEntries({ ...filter, limit: Math.min(pageSize, remaining), ...(afterId === undefined ? {} : { afterId }) });
    for (const entry of page) yield entry;
    remaining -= page.length;
    if (page.length < pageSize) return;
    afterId = page.at(-1)!.id;
  }
}
