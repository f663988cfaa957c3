import type { QuarantineAdmin, QuarantineFilter, QuarantineStatus } from "../core/store-contract/quarantine-admin.js";
import { groupKeyOf, normaliseCause } from "./quarantine-cause.js";

/** Quarantine entries with the same handler, reason and normalised cause, in one status. */
export interface QuarantineGroup {
  /** Stable: pass it back as `QuarantineFilter.group`. The same for every status of the group. */
  key: string;
  handler: string;
  reason: string;
  /** The error text with numbers, ids, uuids, hashes, timestamps and quoted values replaced. */
  cause: string;
  status: QuarantineStatus;
  entries: number;
  firstSeen: Date;
  lastSeen: Date;
  /** The error text of one of the entries, as it was. */
  example: string;
}

/**
 * The quarantine's entries grouped by handler, reason and normalised cause, largest group
 * first. The database counts entries per exact error text (one aggregate query, no bodies
 * read); the texts are normalised and merged here, because the normalisation (regular
 * expressions) would read differently in each database's SQL. `filter.group` keeps one group.
 */
export async function quarantineGroups(admin: QuarantineAdmin, filter: QuarantineFilter = {}): Promise<QuarantineGroup[]> {
  const { group, ...rest } = filter;
  const groups = new Map<string, QuarantineGroup>();
  for (const c of await admin.quarantineCauses(rest)) {
    const cause = normaliseCause(c.detail);
    const key = groupKeyOf(c.handler, c.reason, cause);
    if (group !== undefined && key !== group) continue;
    const id = `${key}/${c.status}`;
    const g = groups.get(id);
    if (!g) {
      groups.set(id, { key, handler: c.handler, reason: c.reason, cause, status: c.status, entries: c.entries, firstSeen: c.firstSeen, lastSeen: c.lastSeen, example: c.detail });
      continue;
    }
    g.entries += c.entries;
    if (c.firstSeen < g.firstSeen) g.firstSeen = c.firstSeen;
    if (c.lastSeen > g.lastSeen) g.lastSeen = c.lastSeen;
  }
  return [...groups.values()].sort((a, b) => b.entries - a.entries || a.firstSeen.getTime() - b.firstSeen.getTime() || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
