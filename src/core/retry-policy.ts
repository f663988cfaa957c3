/** In-process retry of a whole transaction after a transient failure. */
export interface RetryPolicy extends Backoff {
  /** Attempts in all, the first included. Default 5. */
  maxAttempts: number;
  /** First backoff delay in ms; doubles each attempt. Default 20. */
  baseDelayMs: number;
  /** Cap on one delay in ms. Default 2000. */
  maxDelayMs: number;
  /** Give up when the next delay would pass this much time since the first attempt. Default 15000. */
  maxTotalMs: number;
}

/** Exponential backoff: the delay starts at `baseDelayMs` and doubles per attempt up to `maxDelayMs`. */
export interface Backoff {
  baseDelayMs: number;
  maxDelayMs: number;
  /**
   * Default true: each delay is drawn between half its ceiling and the ceiling, so that clients
   * that failed together (replicas losing one broker node, relays losing one database) do not
   * come back in step. False keeps the exact doubling, for a delay that is documented as such.
   */
  jitter?: boolean;
}

export const defaultRetryPolicy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 2000, maxTotalMs: 15_000 };

/**
 * The one backoff of the library: the delay after failed attempt `attempt` (counted from 1),
 * exponential and capped, with jitter unless the backoff turns it off.
 */
export function backoffDelay(backoff: Backoff, attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(backoff.maxDelayMs, backoff.baseDelayMs * 2 ** Math.min(attempt - 1, 30));
  if (backoff.jitter === false) return ceiling;
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** Resolves after `ms`, or as soon as `abort` resolves (a stop): whichever comes first, leaving no timer behind. */
export function sleep(ms: number, abort?: Promise<void>): Promise<void> {
  if (!abort) return new Promise((resolve) => setTimeout(resolve, ms));
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    new Promise<void>((resolve) => { timer = setTimeout(resolve, ms); }),
    abort,
  ]).finally(() => clearTimeout(timer));
}

/**
 * The backoff of a broker reconnection: `reconnectBaseDelayMs` (default 200) doubling to
 * `reconnectMaxDelayMs` (default 10 000), with no limit on attempts.
 */
export function reconnectPolicy(options: { reconnectBaseDelayMs?: number; reconnectMaxDelayMs?: number }): RetryPolicy {
  return {
    maxAttempts: Infinity, maxTotalMs: Infinity,
    baseDelayMs: options.reconnectBaseDelayMs ?? 200, maxDelayMs: options.reconnectMaxDelayMs ?? 10_000,
  };
}
