import type { QuarantineFilter } from "../core/store-contract/quarantine-admin.js";

/** What a bulk replay or discard did (or, in a dry run, would do). */
export interface BulkResult {
  dryRun: boolean;
  /** Entries the filter selected (at most `limit`), whatever became of them. */
  selected: number;
  /** The selected entries per quarantine reason. */
  byReason: Record<string, number>;
  /** Entries replayed (confirmed by the broker) or discarded; in a dry run, those that would be. */
  done: number;
  /** Entries left alone, and why (a conflict without acceptNew, no longer held, ...). */
  skipped: Array<{ id: number; why: string }>;
  /** Entries whose replay failed (the entry is held again) or whose decision could not be recorded. */
  failed: Array<{ id: number; error: string }>;
  /**
   * Replays an earlier run committed but never saw confirmed (it was killed in between), finished
   * by this run under their own audit record; in a dry run, those that would be.
   */
  resumed: number;
  /**
   * Replays committed less than `resumeAfterMs` ago and not confirmed yet: another run may be
   * publishing them right now, so they are left to it (a later run finishes them if it died).
   */
  unconfirmed: number;
  /** Why the run stopped before the end of the selection (aborted, too many failed publishes); null when it did not. */
  stopped: string | null;
}

/** Counts so far, given to `onProgress` after each entry. */
export interface BulkProgress {
  selected: number;
  done: number;
  skipped: number;
  failed: number;
  resumed: number;
}

export function emptyBulkResult(dryRun: boolean): BulkResult {
  return { dryRun, selected: 0, byReason: {}, done: 0, skipped: [], failed: [], resumed: 0, unconfirmed: 0, stopped: null };
}

export function progressOf(r: BulkResult): BulkProgress {
  return { selected: r.selected, done: r.done, skipped: r.skipped.length, failed: r.failed.length, resumed: r.resumed };
}

/** The checks both bulk operations make before touching anything. */
export function checkBulkOptions(name: string, options: { filter: QuarantineFilter; actor: string; reason: string; limit?: number; concurrency?: number }): void {
  if (options.reason.trim() === "") throw new RangeError(`a bulk ${name} needs a reason (kept in the audit of every entry)`);
  if (options.actor.trim() === "") throw new RangeError(`a bulk ${name} needs an actor`);
  if (options.filter.status !== undefined && options.filter.status !== "held") {
    throw new RangeError(`a bulk ${name} selects held entries only (filter.status ${JSON.stringify(options.filter.status)})`);
  }
  if (options.filter.pendingReplay) throw new RangeError(`a bulk ${name} selects held entries: filter.pendingReplay does not apply`);
  if (options.limit !== undefined && (!Number.isSafeInteger(options.limit) || options.limit < 1)) throw new RangeError(`limit must be a positive integer, got ${options.limit}`);
  if (options.concurrency !== undefined && (!Number.isSafeInteger(options.concurrency) || options.concurrency < 1 || options.concurrency > 64)) {
    throw new RangeError(`concurrency must be an integer from 1 to 64, got ${options.concurrency}`);
  }
}

/**
 * Runs `work` on each item of `source` with at most `concurrency` at once, in the source's
 * order of taking, until the source ends or `stop()` says so. The source is an async generator:
 * its `next()` calls queue, so workers never get the same item. A source that fails (the
 * database, reading the next page) ends the run through `sourceFailed`, so that what was done
 * is still reported.
 */
export async function forEachConcurrently<T>(
  source: AsyncGenerator<T>, concurrency: number, stop: () => boolean, work: (item: T) => Promise<void>, sourceFailed: (error: unknown) => void,
): Promise<void> {
  let failed = false;
  const worker = async () => {
    while (!stop() && !failed) {
      let next: IteratorResult<T>;
      try {
        next = await source.next();
      } catch (error) {
        if (!failed) sourceFailed(error);
        failed = true;
        return;
      }
      if (next.done) return;
      await work(next.value);
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    await source.return(undefined);
  }
}
