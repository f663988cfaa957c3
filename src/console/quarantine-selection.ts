import type { BulkProgress, BulkResult } from "../quarantine/bulk-operation.js";
import { bulkDiscard } from "../quarantine/discard.js";
import { bulkReplay } from "../quarantine/bulk-replay.js";
import type { QuarantineAdmin, QuarantineFilter } from "../core/store-contract/quarantine-admin.js";
import { type QuarantineGroup, quarantineGroups } from "../quarantine/quarantine-groups.js";
import type { ConfirmedPublish } from "../quarantine/replay.js";
import type { ConsoleFilter } from "./console-filter.js";

/** A bulk action as the console asks for it: the selection, who and why, and the run's limits. */
export interface BulkRequest {
  filter: ConsoleFilter;
  actor: string;
  reason: string;
  limit?: number;
  dryRun?: boolean;
  ratePerSecond?: number;
  acceptNew?: boolean;
  acceptStale?: boolean;
  /** Stops the run between two entries (what was done stays done, and audited). */
  signal?: AbortSignal;
  onProgress?: (progress: BulkProgress) => void;
}

/** The filter without its page (size and position): what groups and bulk actions select. */
function unpaged(filter: ConsoleFilter): QuarantineFilter {
  const { limit: _limit, afterId: _afterId, ...rest } = filter;
  return rest;
}

export function groupsOf(admin: QuarantineAdmin, filter: ConsoleFilter): Promise<QuarantineGroup[]> {
  return quarantineGroups(admin, unpaged(filter));
}

/** A bulk action selects held entries; a dry run records nothing, but the library wants a reason all the same. */
function bulkOptions(r: BulkRequest) {
  return {
    filter: { ...unpaged(r.filter), status: "held" as const }, actor: r.actor, reason: r.dryRun ? r.reason || "dry run" : r.reason,
    ...(r.limit !== undefined ? { limit: r.limit } : {}), ...(r.dryRun ? { dryRun: true } : {}),
    ...(r.signal ? { signal: r.signal } : {}), ...(r.onProgress ? { onProgress: r.onProgress } : {}),
  };
}

export function replayBulk(admin: QuarantineAdmin, publish: ConfirmedPublish, r: BulkRequest): Promise<BulkResult> {
  return bulkReplay(admin, publish, {
    ...bulkOptions(r), ...(r.ratePerSecond !== undefined ? { ratePerSecond: r.ratePerSecond } : {}),
    ...(r.acceptNew ? { acceptNew: true } : {}), ...(r.acceptStale ? { acceptStale: true } : {}),
  });
}

export function discardBulk(admin: QuarantineAdmin, r: BulkRequest): Promise<BulkResult> {
  return bulkDiscard(admin, bulkOptions(r));
}
