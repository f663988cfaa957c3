import { InboxError } from "../core/errors.js";
import { COUNT, DURATION, POSITIVE_INTEGER, checkNumbers } from "../core/option-checks.js";
import { backoffDelay, sleep } from "../core/retry-policy.js";
import { checkReplayWindow } from "./replay-window.js";
import type { PurgeableRecords, QuarantineHold, RetentionAdmin } from "../core/store-contract/retention-admin.js";

export interface CleanupOptions {
  /** Required: dedup records first seen longer ago than this are purged. No default on purpose. */
  replayWindowMs: number;
  /** Overrides the minimum-window guard and the quarantine hold. */
  force?: boolean;
  /** Count what would be purged; delete nothing. */
  dryRun?: boolean;
  /** Rows per delete transaction. Default 1000: each batch holds its locks for milliseconds. */
  batchSize?: number;
  /** Pause between batches, in ms, so consumers' transactions interleave. Default 10. */
  pauseMs?: number;
  /** Only this handler's records (and horizon). Default: every handler. */
  handler?: string;
  /** Minimum window without `force`. Default MINIMUM_REPLAY_WINDOW_MS (1 day). */
  minimumWindowMs?: number;
  /** Stop after this many batches (the horizon is consistent after every batch). Default: no limit. */
  maxBatches?: number;
  /** Called after each committed batch. */
  onBatch?: (progress: { batch: number; deleted: number; total: number }) => void;
  signal?: AbortSignal;
}

export interface CleanupReport {
  dryRun: boolean;
  replayWindowMs: number;
  /** now - replayWindow, on the database's clock. */
  requestedCutoff: Date;
  /** What was used: the requested cutoff, or the quarantine hold when that is earlier. */
  cutoff: Date;
  /** The held quarantine entry that moved the cutoff back, if any. */
  limitedBy: QuarantineHold | null;
  /** Dry run: what would be purged. */
  purgeable: PurgeableRecords | null;
  purged: number;
  batches: number;
  /** Horizons advanced by this run. */
  horizons: Array<{ handler: string; purgedThrough: Date }>;
  /** True when maxBatches or the signal stopped the run before everything eligible was purged. */
  incomplete: boolean;
  /** Redelivery counts (poison detection) last touched before the cutoff, deleted by this run. */
  redeliveryCountsPurged: number;
}

const TRANSIENT_ATTEMPTS = 5;
/** 100 ms doubling, exactly: at most four pauses, 1.5 s in all. */
const TRANSIENT_BACKOFF = { baseDelayMs: 100, maxDelayMs: 800, jitter: false } as const;

/**
 * Purges dedup records older than the replay window, in small batches, each its own short
 * transaction that also advances the purge horizon; never one long blocking DELETE. Consumers
 * keep running: a batch deletes rows no consumer holds (PostgreSQL skips locked rows) and at
 * most `batchSize` of them, then pauses. Refuses a window under the minimum and stops short of
 * the oldest entry held in quarantine, unless forced.
 */
export async function purgeExpiredDedupRecords(store: RetentionAdmin, options: CleanupOptions): Promise<CleanupReport> {
  checkNumbers("", options, { batchSize: POSITIVE_INTEGER, pauseMs: DURATION, maxBatches: COUNT, minimumWindowMs: { min: 0 } });
  checkReplayWindow(options.replayWindowMs, { force: options.force ?? false, ...(options.minimumWindowMs !== undefined ? { minimumMs: options.minimumWindowMs } : {}) });
  const batchSize = options.batchSize ?? 1000;
  const pauseMs = options.pauseMs ?? 10;
  const now = await store.now();
  const requestedCutoff = new Date(now.getTime() - options.replayWindowMs);
  const hold = options.force ? null : await store.quarantineHold(options.handler);
  const limitedBy = hold && hold.holdFrom.getTime() < requestedCutoff.getTime() ? hold : null;
  const cutoff = limitedBy ? limitedBy.holdFrom : requestedCutoff;
  const report: CleanupReport = {
    dryRun: options.dryRun ?? false, replayWindowMs: options.replayWindowMs, requestedCutoff, cutoff, limitedBy,
    purgeable: null, purged: 0, batches: 0, horizons: [], incomplete: false, redeliveryCountsPurged: 0,
  };
  if (report.dryRun) {
    report.purgeable = await store.countPurgeable(cutoff, options.handler);
    return report;
  }
  const horizons = new Map<string, Date>();
  for (;;) {
    if (options.signal?.aborted || (options.maxBatches !== undefined && report.batches >= options.maxBatches)) {
      report.incomplete = true;
      break;
    }
    const batch = await withTransientRetries(() => store.purgeBatch(cutoff, batchSize, options.handler));
    if (batch.deleted === 0) break;
    report.batches++;
    report.purged += batch.deleted;
    for (const h of batch.handlers) horizons.set(h.handler, h.purgedThrough);
    options.onBatch?.({ batch: report.batches, deleted: batch.deleted, total: report.purged });
    if (batch.deleted < batchSize) break;
    if (pauseMs > 0) await sleep(pauseMs);
  }
  if (!report.incomplete) report.redeliveryCountsPurged = await withTransientRetries(() => store.purgeRedeliveryCounts(cutoff, options.handler));
  report.horizons = [...horizons].map(([handler, purgedThrough]) => ({ handler, purgedThrough })).sort((a, b) => (a.handler < b.handler ? -1 : 1));
  return report;
}

/** A batch that hit contention (lock timeout, busy database) is simply run again, after a pause. */
async function withTransientRetries<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      // Only errors a store classified as contention or a lost session; anything else is a bug or
      // a schema problem that a retry would not fix.
      const retryable = error instanceof InboxError && (error.kind === "transient" || error.kind === "connection");
      if (!retryable || attempt >= TRANSIENT_ATTEMPTS) throw error;
      await sleep(backoffDelay(TRANSIENT_BACKOFF, attempt));
    }
  }
}
