/**
 * Spaces replays at most `ratePerSecond` apart, over every worker of a run: each caller gets
 * the next slot. A run that falls behind does not burst to catch up (a slot is never earlier
 * than now), so the consumers never see more than the rate. Without a rate, no wait.
 */
export class ReplayPacer {
  private nextAt = 0;
  private readonly intervalMs: number;

  constructor(ratePerSecond: number | undefined, private readonly signal?: AbortSignal) {
    if (ratePerSecond !== undefined && (!Number.isFinite(ratePerSecond) || ratePerSecond <= 0)) {
      throw new RangeError(`ratePerSecond must be a positive number, got ${ratePerSecond}`);
    }
    this.intervalMs = ratePerSecond === undefined ? 0 : 1000 / ratePerSecond;
  }

  /** Resolves at the caller's slot, or at once when the signal aborts (the caller checks it). */
  async next(): Promise<void> {
    if (this.intervalMs === 0 || this.signal?.aborted) return;
    const now = performance.now();
    const at = Math.max(now, this.nextAt);
    this.nextAt = at + this.intervalMs;
    if (at - now < 1) return;
    await new Promise<void>((done) => {
      const timer = setTimeout(finish, at - now);
      const signal = this.signal;
      function finish() {
        clearTimeout(timer);
        signal?.removeEventListener("abort", finish);
        done();
      }
      signal?.addEventListener("abort", finish, { once: true });
    });
  }
}
