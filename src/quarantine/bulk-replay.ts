import { describeError } from "../core/errors.js";
import { type BulkProgress, type BulkResult, checkBulkOptions, emptyBulkResult, forEachConcurrently, progressOf } from "./bulk-operation.js";
import type { AuditRecord, QuarantineAdmin, QuarantineDetail, QuarantineFilter } from "../core/store-contract/quarantine-admin.js";
import { QuarantineOperationError } from "./quarantine-errors.js";
import { selectQuarantineEntries } from "./quarantine-selection.js";
import { type ConfirmedPublish, replayMessage } from "./replay.js";
import { ReplayPacer } from "./replay-pacer.js";

export interface BulkReplayOptions {
  /** Which held entries (`status` must be unset or `held`). */
  filter: QuarantineFilter;
  actor: string;
  /** Kept in the audit record of every entry. */
  reason: string;
  /** At most this many entries selected. Default: every entry the filter selects. */
  limit?: number;
  /** At most this many republishes per second. Default: as fast as the database and broker go. */
  ratePerSecond?: number;
  /** Decide nothing and publish nothing: count what would happen. */
  dryRun?: boolean;
  /** Conflicts: the quarantined version replaces the stored one. Without it conflicts are skipped. */
  acceptNew?: boolean;
  /** Stale events: let exactly these versions past the stale fence. Without it stale entries are skipped. */
  acceptStale?: boolean;
  /** Stops the run after the entries in hand (each is finished, confirmed or put back). */
  signal?: AbortSignal;
  onProgress?: (progress: BulkProgress) => void;
  /** Replays in flight at once. Default 1 (in id order). */
  concurrency?: number;
  /**
   * A replay committed but not confirmed is taken for an interrupted one (and finished) only
   * once its decision is this old: younger, another run may still be waiting for its confirm.
   * Default 30,000 (three default confirm timeouts); 0 when the earlier run is known to be dead.
   */
  resumeAfterMs?: number;
  /** Stop after this many republishes fail in a row: the broker or the queue is likely gone. Default 5. */
  maxConsecutiveFailures?: number;
}

const PAGE = 200;

/**
 * Replays every held entry a filter selects, each exactly as `replayQuarantineEntry` does (its
 * decision and audit record committed, then the republish with confirms, then `published_at`;
 * a failed publish puts it back to `held`). Conflicts and stale events are never replayed
 * blindly: without `acceptNew` / `acceptStale` they are skipped, with the reason.
 *
 * Idempotent: a replayed entry is no longer `held`, so a second run selects nothing, and the
 * decision is taken only if the entry is still held (two runs at once never both replay it).
 * A run killed between an entry's commit and its broker confirm leaves an audit record with
 * neither `published_at` nor `failure`: the next run over the same filter finishes those first,
 * under that record, once they are `resumeAfterMs` old (a younger one may be another live
 * run's): one the inbox already applied is only marked confirmed; the others are sent again,
 * which may copy a message the broker already had and no consumer took yet; the consumer takes
 * that copy as a duplicate (the inbox dedups by event id, a grant is spent once).
 */
export async function bulkReplay(admin: QuarantineAdmin, publish: ConfirmedPublish, options: BulkReplayOptions): Promise<BulkResult> {
  checkBulkOptions("replay", options);
  const maxFailures = options.maxConsecutiveFailures ?? 5;
  const result = emptyBulkResult(options.dryRun ?? false);
  const pacer = new ReplayPacer(options.ratePerSecond, options.signal);
  let failuresInARow = 0;
  const stop = () => {
    if (options.signal?.aborted && result.stopped === null) result.stopped = "aborted";
    return result.stopped !== null;
  };
  const report = () => options.onProgress?.(progressOf(result));
  const publishOrPutBack = async (entry: QuarantineDetail, audit: AuditRecord): Promise<boolean> => {
    try {
      await publish(replayMessage(entry, audit));
    } catch (error) {
      const failure = describeError(error);
      await admin.failReplay(audit.id, failure);
      result.failed.push({ id: entry.id, error: failure });
      if (++failuresInARow >= maxFailures) result.stopped = `${failuresInARow} republishes failed in a row (last: ${failure})`;
      return false;
    }
    failuresInARow = 0;
    await admin.confirmReplay(audit.id);
    return true;
  };
  const { concurrency = 1 } = options;
  const databaseFailed = (error: unknown) => {
    result.stopped = `the database failed: ${describeError(error)}`;
  };
  const guarded = (work: (entry: QuarantineDetail) => Promise<void>) => async (entry: QuarantineDetail) => {
    try {
      await work(entry);
    } catch (error) {
      // The database failed under us: record the entry and stop rather than fail thousands alike.
      result.failed.push({ id: entry.id, error: describeError(error) });
      databaseFailed(error);
    }
    report();
  };

  // First, replays an earlier run committed but never saw confirmed.
  const resumeAfterMs = options.resumeAfterMs ?? 30_000;
  if (!Number.isFinite(resumeAfterMs) || resumeAfterMs < 0) throw new RangeError(`resumeAfterMs must be 0 or more, got ${resumeAfterMs}`);
  let resumeBefore: number;
  try {
    resumeBefore = (await admin.now()).getTime() - resumeAfterMs;
  } catch (error) {
    databaseFailed(error);
    return result;
  }
  const { status: _held, ...rest } = options.filter;
  await forEachConcurrently(selectQuarantineEntries(admin, { ...rest, pendingReplay: true }, { pageSize: PAGE }), concurrency, stop, guarded(async (entry) => {
    const audit = (await admin.quarantineAudit(entry.id)).at(-1);
    if (!audit || audit.action !== "replay" || audit.publishedAt !== null || audit.failure !== null) return;
    if (audit.at.getTime() > resumeBefore) {
      result.unconfirmed++;
      return;
    }
    if (result.dryRun) {
      result.resumed++;
      return;
    }
    // The consumer may have applied the earlier run's copy already: then it is not sent again.
    if (await alreadyApplied(admin, entry)) {
      await admin.confirmReplay(audit.id);
      result.resumed++;
      return;
    }
    await pacer.next();
    if (stop()) return;
    if (await publishOrPutBack(entry, audit)) result.resumed++;
  }), databaseFailed);

  const selection = selectQuarantineEntries(admin, { ...rest, status: "held" }, { pageSize: PAGE, ...(options.limit === undefined ? {} : { limit: options.limit }) });
  await forEachConcurrently(selection, concurrency, stop, guarded(async (entry) => {
    result.selected++;
    result.byReason[entry.reason] = (result.byReason[entry.reason] ?? 0) + 1;
    const why = whySkipped(entry, options);
    if (why !== null) {
      result.skipped.push({ id: entry.id, why });
      return;
    }
    if (result.dryRun) {
      result.done++;
      return;
    }
    await pacer.next();
    if (stop()) return;
    let audit;
    try {
      audit = await admin.beginResolution(entry.id, {
        action: "replay", actor: options.actor, reason: options.reason, onlyIfHeld: true,
        ...(entry.reason === "conflict" && options.acceptNew ? { acceptNew: true } : {}),
        ...(entry.reason === "stale" && options.acceptStale ? { acceptStale: true } : {}),
      });
    } catch (error) {
      if (!(error instanceof QuarantineOperationError)) throw error;
      result.skipped.push({ id: entry.id, why: error.message });
      return;
    }
    if (await publishOrPutBack(entry, audit)) result.done++;
  }), databaseFailed);
  return result;
}

/**
 * True when the inbox holds this very version of the entry's event: a replay whose confirm was
 * never recorded reached the broker and the consumer applied it. An entry without a key (a body
 * that was not a valid event) cannot be told apart and is sent again.
 */
async function alreadyApplied(admin: QuarantineAdmin, entry: QuarantineDetail): Promise<boolean> {
  if (entry.tenant === null || entry.eventId === null || entry.fingerprint === null) return false;
  const stored = await admin.storedVersion(entry.handler, { tenant: entry.tenant, eventId: entry.eventId });
  return stored?.fingerprint === entry.fingerprint;
}

/** Why a bulk replay leaves an entry alone, or null when it replays it. */
export function whySkipped(entry: QuarantineDetail, options: { acceptNew?: boolean; acceptStale?: boolean }): string | null {
  if (entry.reason === "conflict" && !options.acceptNew) {
    return "a conflict: replayed as it is it would conflict again; compare the versions (quarantine diff) and choose accept-new, or discard it";
  }
  if (entry.reason === "stale" && !options.acceptStale) {
    return "stale: replayed as it is it would be stale again; check it was never applied and choose accept-stale, or discard it";
  }
  if (entry.bodyTruncated) return `only the first ${entry.body.length} bytes of the body were kept: republish the quarantine queue's full copy`;
  return null;
}
