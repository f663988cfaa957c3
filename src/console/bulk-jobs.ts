import { randomBytes } from "node:crypto";
import { describeError } from "../core/errors.js";
import { redactSecrets } from "../core/redact-secrets.js";
import type { BulkProgress, BulkResult } from "../quarantine/bulk-operation.js";

/** A bulk action running in the background, so that a page can show its progress instead of waiting on one long request. */
export interface BulkJob {
  id: string;
  action: "replay" | "discard";
  actor: string;
  startedAt: Date;
  progress: BulkProgress;
  /** Set when the run ended. */
  result: BulkResult | null;
  error: string | null;
  finishedAt: Date | null;
  cancel(): void;
}

const KEPT_JOBS = 50;

/** The console's running and recent bulk jobs, in memory. */
export class BulkJobs {
  private readonly jobs = new Map<string, BulkJob>();
  private readonly running = new Set<Promise<unknown>>();

  start(action: BulkJob["action"], actor: string, run: (signal: AbortSignal, onProgress: (p: BulkProgress) => void) => Promise<BulkResult>): BulkJob {
    const controller = new AbortController();
    const job: BulkJob = {
      id: randomBytes(9).toString("base64url"), action, actor, startedAt: new Date(), progress: { selected: 0, done: 0, skipped: 0, failed: 0, resumed: 0 },
      result: null, error: null, finishedAt: null, cancel: () => controller.abort(),
    };
    this.jobs.set(job.id, job);
    this.forgetOld();
    const done = run(controller.signal, (p) => { job.progress = p; })
      .then((result) => {
        job.result = result;
        job.progress = { selected: result.selected, done: result.done, skipped: result.skipped.length, failed: result.failed.length, resumed: result.resumed };
      })
      .catch((error: unknown) => { job.error = redactSecrets(describeError(error)); })
      .finally(() => {
        job.finishedAt = new Date();
        this.running.delete(done);
      });
    this.running.add(done);
    return job;
  }

  get(id: string): BulkJob | undefined {
    return this.jobs.get(id);
  }

  /** Cancels every running job and waits until each stopped (the console is closing: its store must not close under a replay). */
  async cancelAll(): Promise<void> {
    for (const job of this.jobs.values()) if (!job.finishedAt) job.cancel();
    await Promise.allSettled([...this.running]);
  }

  private forgetOld(): void {
    for (const [id, job] of this.jobs) {
      if (this.jobs.size <= KEPT_JOBS) return;
      if (job.finishedAt) this.jobs.delete(id);
    }
  }
}
