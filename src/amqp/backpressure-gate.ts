import type { Backpressure } from "../core/backpressure.js";
import { describeError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";

/** While paused, the consumer says so again at most this often, with the figures of the last check. */
export const STILL_PAUSED_LOG_INTERVAL_MS = 60_000;

export interface BackpressureGateOptions {
  /** The queue, for the logs. */
  queue: string;
  logger: Logger;
  /** Called when the gate opens again after a pause: the consumer starts the batches that waited. */
  onOpen: () => void;
  /** Clock, for tests. Default Date.now. */
  now?: () => number;
}

/** A paused gate as the consumer's health shows it. */
export interface BackpressureState {
  name: string;
  paused: boolean;
  /** When the current pause began; null while not paused. */
  pausedSince: Date | null;
  /** The last check's figures; {} before the first one. */
  detail: Record<string, unknown>;
}

/**
 * Decides whether the consumer may start a batch, from a Backpressure read at most once per its
 * interval. While open, `open` answers from the last check at once and starts the next check in
 * the background when the last one is older than the interval: a batch never waits for it. Once
 * a check says pause, no batch starts until a later check (one per interval) says otherwise.
 */
export class BackpressureGate {
  /** When the current pause began; undefined while batches may start. */
  private pausedAt: number | undefined;
  private lastCheckAt = -Infinity;
  private lastStillPausedLogAt = 0;
  private checking: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private released = false;
  private detail: Record<string, unknown> = {};
  private readonly now: () => number;

  constructor(private readonly source: Backpressure, private readonly options: BackpressureGateOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Whether a batch may start now. */
  get open(): boolean {
    if (this.released) return true;
    if (!this.paused && this.now() - this.lastCheckAt >= this.source.checkIntervalMs) void this.refresh();
    return !this.paused;
  }

  /** Whether it holds batches back now. */
  get paused(): boolean {
    return this.pausedAt !== undefined;
  }

  state(): BackpressureState {
    return { name: this.source.name, paused: this.paused, pausedSince: this.pausedAt === undefined ? null : new Date(this.pausedAt), detail: { ...this.detail } };
  }

  /**
   * Holds nothing back any more, for good: the consumer is stopping and finishes what it holds.
   * A check under way is not waited for (a database that does not answer must not hold the stop
   * up); whatever it answers later changes nothing and logs nothing.
   */
  release(): void {
    this.released = true;
    this.clearTimer();
    const wasPaused = this.paused;
    this.pausedAt = undefined;
    if (wasPaused) this.options.onOpen();
  }

  private refresh(): Promise<void> {
    this.checking ??= this.check().finally(() => { this.checking = undefined; });
    return this.checking;
  }

  private async check(): Promise<void> {
    this.lastCheckAt = this.now();
    const { logger, queue } = this.options;
    const { name } = this.source;
    let reading;
    try {
      reading = await this.source.check(this.paused);
    } catch (error) {
      if (this.released) return;
      logger.warn(`could not read the ${name}; consumption stays ${this.paused ? "paused" : "on"} until a check succeeds`, { queue, error: describeError(error) });
      if (this.paused) this.pollLater();
      return;
    }
    if (this.released) return;
    this.detail = reading.detail;
    const at = this.now();
    const { pausedAt } = this;
    if (pausedAt === undefined) {
      if (!reading.pause) return;
      this.pausedAt = this.lastStillPausedLogAt = at;
      logger.warn(`${name} over its bound: no new batch starts until it comes down (deliveries held stay unacked)`, { queue, ...reading.detail });
    } else if (!reading.pause) {
      this.pausedAt = undefined;
      logger.info(`${name} back under its bound: consumption resumes`, { queue, pausedMs: at - pausedAt, ...reading.detail });
      this.options.onOpen();
      return;
    } else if (at - this.lastStillPausedLogAt >= STILL_PAUSED_LOG_INTERVAL_MS) {
      this.lastStillPausedLogAt = at;
      // The broker's consumer timeout (30 minutes by default) closes a channel whose deliveries
      // stay unacked longer: they then go back to the queue, to be delivered again.
      logger.warn(`consumption still paused on the ${name}`, { queue, pausedMs: at - pausedAt, ...reading.detail });
    }
    this.pollLater();
  }

  private pollLater(): void {
    this.clearTimer();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.refresh();
    }, this.source.checkIntervalMs);
    // The consumer's connection keeps the process alive while it runs; this timer alone must not.
    this.timer.unref();
  }

  private clearTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
