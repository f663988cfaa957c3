import type { QuarantineAdmin, QuarantineDetail, QuarantineStatus } from "../quarantine/quarantine-admin.js";
import type { ConfirmedPublish } from "../quarantine/replay.js";
import type { ConsoleFilter } from "./console-filter.js";

/** Entries grouped by handler, reason and a normalised cause. */
export interface ConsoleGroup {
  key: string;
  handler: string;
  reason: string;
  cause: string;
  status: QuarantineStatus;
  entries: number;
  firstSeen: Date;
  lastSeen: Date;
}

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

export interface BulkProgressCounts {
  selected: number;
  done: number;
  skipped: number;
  failed: number;
}

export interface BulkOutcome {
  dryRun: boolean;
  selected: number;
  byReason: Record<string, number>;
  done: number;
  skipped: Array<{ id: number; why: string }>;
  failed: Array<{ id: number; error: string }>;
  /** Replays an interrupted earlier run had committed and this one finished. */
  resumed?: number;
  /** Why the run ended before the end of its selection (cancelled, failures in a row); null when it did not. */
  stopped?: string | null;
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
