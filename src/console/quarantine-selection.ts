import type { QuarantineAdmin, QuarantineDetail } from "../quarantine/quarantine-admin.js";
import type { BulkProgress, BulkResult } from "../quarantine/bulk-operation.js";
import type { QuarantineGroup } from "../quarantine/quarantine-groups.js";
import type { ConfirmedPublish } from "../quarantine/replay.js";
import type { ConsoleFilter } from "./console-filter.js";

/** The library's groups, outcome and progress, as the console shows them. */
export type ConsoleGroup = QuarantineGroup;
export type BulkOutcome = BulkResult;
export type BulkProgressCounts = BulkProgress;

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
  onProgress?: (progress: BulkProgressCounts) => void;
}

/**
 * What the console needs to select and act on many entries: the list, the groups and the bulk
 * actions. The console talks to this interface only, so the selection can move into the store
 * (keyset paging, SQL filters) without touching a page.
 */
export interface QuarantineSelection {
  list(admin: QuarantineAdmin, filter: ConsoleFilter): Promise<QuarantineDetail[]>;
  groups(admin: QuarantineAdmin, filter: ConsoleFilter): Promise<ConsoleGroup[]>;
  bulkReplay(admin: QuarantineAdmin, publish: ConfirmedPublish, request: BulkRequest): Promise<BulkOutcome>;
  bulkDiscard(admin: QuarantineAdmin, request: BulkRequest): Promise<BulkOutcome>;
}
