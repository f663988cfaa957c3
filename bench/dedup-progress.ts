/**
 * How far the replicas are, seen from the database: the number of dedup records (one per event
 * applied or refused), read every `intervalMs`. The samples give the throughput (time until
 * every event has its record) and the gaps in consumption (the longest time without a new
 * record around a broker node's kill or a replica's departure).
 */
import pg from "pg";

export interface ProgressSample {
  /** performance.now() when the count query was sent. */
  at: number;
  count: number;
}

export class DedupProgress {
  readonly samples: ProgressSample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failure: Error | undefined;

  private constructor(private readonly client: pg.Client, private readonly intervalMs: number) {}

  static async start(databaseUrl: string, intervalMs = 50): Promise<DedupProgress> {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const progress = new DedupProgress(client, intervalMs);
    await progress.poll();
    return progress;
  }

  get count(): number {
    return this.samples.at(-1)?.count ?? 0;
  }

  /** Resolves once `count` records exist; rejects after `timeoutMs` or when `abort` returns a reason. */
  async waitFor(count: number, timeoutMs: number, abort?: () => string | undefined): Promise<number> {
    const at = await this.reached(count, timeoutMs, abort);
    if (at === undefined) throw new Error(`timed out after ${timeoutMs} ms waiting for ${count} dedup records (${this.count} so far)`);
    return at;
  }

  /** Like waitFor, but resolves with undefined after `timeoutMs` instead of rejecting. */
  async reached(count: number, timeoutMs: number, abort?: () => string | undefined): Promise<number | undefined> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (this.failure) throw this.failure;
      const reached = this.samples.find((s) => s.count >= count);
      if (reached) return reached.at;
      const reason = abort?.();
      if (reason) throw new Error(`${reason} while waiting for ${count} dedup records (${this.count} so far)`);
      if (performance.now() > deadline) return undefined;
      await new Promise((resolve) => setTimeout(resolve, this.intervalMs));
    }
  }

  /** The first sample with at least one record more than at `since`. */
  firstProgressAfter(since: number): ProgressSample | undefined {
    const base = [...this.samples].reverse().find((s) => s.at <= since)?.count ?? 0;
    return this.samples.find((s) => s.at > since && s.count > base);
  }

  /**
   * The longest time between two consecutive increases of the count among the samples of
   * [from, to], in ms; undefined with fewer than two increases.
   */
  longestGap(from: number, to: number): { ms: number; startedAt: number; endedAt: number } | undefined {
    let previousIncrease: number | undefined;
    let best: { ms: number; startedAt: number; endedAt: number } | undefined;
    for (let i = 1; i < this.samples.length; i++) {
      const sample = this.samples[i]!;
      if (sample.at < from || sample.at > to || sample.count <= this.samples[i - 1]!.count) continue;
      if (previousIncrease !== undefined && (!best || sample.at - previousIncrease > best.ms)) {
        best = { ms: sample.at - previousIncrease, startedAt: previousIncrease, endedAt: sample.at };
      }
      previousIncrease = sample.at;
    }
    return best;
  }

  startPolling(): void {
    const loop = () => {
      if (this.stopped) return;
      this.poll().then(() => { this.timer = setTimeout(loop, this.intervalMs); }, (error: unknown) => {
        this.failure = error instanceof Error ? error : new Error(String(error));
      });
    };
    this.timer = setTimeout(loop, this.intervalMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.client.end().catch(() => undefined);
  }

  private async poll(): Promise<void> {
    const at = performance.now();
    const { rows } = await this.client.query<{ n: string }>("SELECT count(*)::text AS n FROM rabbit_inbox_dedup");
    this.samples.push({ at, count: Number(rows[0]!.n) });
  }
}
