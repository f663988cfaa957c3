import { type BulkProgress, type BulkResult, checkBulkOptions, emptyBulkResult, forEachConcurrently, progressOf } from "./bulk-operation.js";
import type { AuditRecord, QuarantineAdmin, QuarantineFilter } from "../core/store-contract/quarantine-admin.js";
import { QuarantineOperationError } from "./quarantine-errors.js";
import { selectQuarantineEntries } from "./quarantine-selection.js";
import { describeError } from "../core/errors.js";

/**
 * Discards a quarantine entry: it stops blocking cleanup and is never replayed. The entry stays
 * (status `discarded`) with an audit record of who, when and why.
 */
export async function discardQuarantineEntry(admin: QuarantineAdmin, request: { id: number; actor: string; reason: string }): Promise<AuditRecord> {
  if (request.reason.trim() === "") throw new RangeError("a discard needs a reason");
  return admin.beginResolution(request.id, { action: "discard", actor: request.actor, reason: request.reason });
}

export interface BulkDiscardOptions {
  /** Which held entries (`status` must be unset or `held`). */
  filter: QuarantineFilter;
  actor: string;
  /** Kept in the audit record of every entry. */
  reason: string;
  /** At most this many entries selected. Default: every entry the filter selects. */
  limit?: number;
  /** Decide nothing: count what would happen. */
  dryRun?: boolean;
  signal?: AbortSignal;
  onProgress?: (progress: BulkProgress) => void;
  /** Discards in flight at once. Default 1. */
  concurrency?: number;
}

/**
 * Discards every held entry a filter selects, each as `discardQuarantineEntry` does: status
 * `discarded` and an audit record, in one transaction per entry. An entry that is no longer held
 * when its turn comes (replayed or discarded meanwhile) is skipped.
 */
export async function bulkDiscard(admin: QuarantineAdmin, options: BulkDiscardOptions): Promise<BulkResult> {
  checkBulkOptions("discard", options);
  const result = emptyBulkResult(options.dryRun ?? false);
  const stop = () => {
    if (options.signal?.aborted && result.stopped === null) result.stopped = "aborted";
    return result.stopped !== null;
  };
  const selection = selectQuarantineEntries(admin, { ...options.filter, status: "held" }, { pageSize: 200, ...(options.limit === undefined ? {} : { limit: options.limit }) });
  await forEachConcurrently(selection, options.concurrency ?? 1, stop, async (entry) => {
    result.selected++;
    result.byReason[entry.reason] = (result.byReason[entry.reason] ?? 0) + 1;
    if (result.dryRun) {
      result.done++;
    } else {
      try {
        await admin.beginResolution(entry.id, { action: "discard", actor: options.actor, reason: options.reason, onlyIfHeld: true });
        result.done++;
      } catch (error) {
        if (error instanceof QuarantineOperationError) result.skipped.push({ id: entry.id, why: error.message });
        else {
          result.failed.push({ id: entry.id, error: describeError(error) });
          result.stopped = `the database failed: ${describeError(error)}`;
        }
      }
    }
    options.onProgress?.(progressOf(result));
  }, (error) => {
    result.stopped = `the database failed: ${describeError(error)}`;
  });
  return result;
}
