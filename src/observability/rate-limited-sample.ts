/**
 * A value read from somewhere costly (a database query), at most once per interval: calls in
 * between get the last value, and concurrent calls share one read.
 */
export class RateLimitedSample<T> {
  private last: { value: T; at: number } | undefined;
  private reading: Promise<T> | undefined;

  constructor(private readonly read: () => Promise<T>, private readonly intervalMs: number, private readonly now: () => number = Date.now) {}

  /** The last value when it is fresh enough, otherwise a new read. Rejects when that read fails. */
  get(): Promise<T> {
    if (this.last && this.now() - this.last.at < this.intervalMs) return Promise.resolve(this.last.value);
    this.reading ??= this.read().then((value) => {
      this.last = { value, at: this.now() };
      return value;
    }).finally(() => { this.reading = undefined; });
    return this.reading;
  }
}
