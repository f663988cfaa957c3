/**
 * Something downstream of the consumer that can ask it to hold off: while `check` says pause,
 * the consumer starts no new batch. The deliveries it holds stay unacked (at most a prefetch's
 * worth) and the broker sends no more until batches start again. The outbox's is
 * `outboxBackpressure()`; any other condition (a downstream service's health, a disk) fits.
 */
export interface Backpressure {
  /** What it watches, for the logs and the consumer's health: e.g. "outbox backlog". */
  readonly name: string;
  /**
   * How often the consumer asks, in ms: at most once per interval while batches run, and once
   * per interval while paused, until `check` lets it go on.
   */
  readonly checkIntervalMs: number;
  /**
   * Whether to pause now. `paused` is the consumer's state when asked, so that the condition
   * can resume below a lower mark than the one it paused at (and not flap around one value).
   * A rejection keeps the consumer in the state it is in; the failure is logged.
   */
  check(paused: boolean): Promise<BackpressureReading>;
}

export interface BackpressureReading {
  pause: boolean;
  /** What the decision was made on, for the logs and the health: e.g. `{ pending: 5000, maxPending: 5000 }`. */
  detail: Record<string, unknown>;
}
