/** In-process retry of a whole transaction after a transient failure. */
export interface RetryPolicy {
  /** Attempts in all, the first included. Default 5. */
  maxAttempts: number;
  /** First backoff delay in ms; doubles each attempt. Default 20. */
  baseDelayMs: number;
  /** Cap on one delay in ms. Default 2000. */
  maxDelayMs: number;
  /** Give up when the next delay would pass this much time since the first attempt. Default 15000. */
  maxTotalMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 2000, maxTotalMs: 15_000 };

/** Exponential backoff with full jitter; `attempt` counts from 1 (the attempt that just failed). */
export function backoffDelay(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
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
