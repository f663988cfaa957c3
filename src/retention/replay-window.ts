import { formatDuration, parseDuration } from "./duration.js";
import { catalogued } from "../core/error-catalogue.js";
import { InboxError } from "../core/errors.js";

/** Cleanup refused: no replay window configured, or one under the minimum without `force`. */
export class RetentionGuardError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(...catalogued("RI_RETENTION_GUARD"), message, options);
  }
}

/**
 * The shortest replay window cleanup accepts without `force`. Dedup records must outlive the
 * longest time an event can come back: the broker backlog, a dead-letter or quarantine replay,
 * a manual compensation. Anything under a day is almost certainly a typo (`7m` for `7d`).
 */
export const MINIMUM_REPLAY_WINDOW_MS = 86_400_000;

/**
 * The longest replay window accepted: 100 years. Longer is a typo (`99999999d`), and its horizon
 * (now minus the window) would lie before the year 1, which the databases refuse with an error
 * about dates instead of one about the window.
 */
export const MAXIMUM_REPLAY_WINDOW_MS = 36_500 * 86_400_000;

/** Environment variable the `rabbit-inbox` command reads the replay window from. */
export const REPLAY_WINDOW_ENV = "RABBIT_INBOX_REPLAY_WINDOW";

export interface ReplayWindow {
  ms: number;
  /** Where it came from, for messages: `--older-than`, `RABBIT_INBOX_REPLAY_WINDOW`. */
  source: string;
}

/**
 * Picks the replay window from the first source that sets it. There is deliberately no default:
 * a window someone did not choose is a window nobody checked against the real replay delays.
 */
export function resolveReplayWindow(sources: ReadonlyArray<{ source: string; value: string | undefined }>): ReplayWindow {
  for (const { source, value } of sources) {
    if (value !== undefined && value.trim() !== "") return { ms: parseDuration(value), source };
  }
  throw new RetentionGuardError(
    `no replay window configured: pass ${sources.map((s) => s.source).join(" or set ")} (e.g. 14d); see docs/operations.md`,
  );
}

/** Refuses a window shorter than the minimum unless forced, and one longer than the maximum. */
export function checkReplayWindow(windowMs: number, options: { force?: boolean; minimumMs?: number } = {}): void {
  const minimum = options.minimumMs ?? MINIMUM_REPLAY_WINDOW_MS;
  if (!Number.isSafeInteger(windowMs) || windowMs < 0) throw new RetentionGuardError(`replay window must be a duration of 0 or more, got ${windowMs} ms`);
  if (windowMs > MAXIMUM_REPLAY_WINDOW_MS) {
    throw new RetentionGuardError(
      `replay window ${formatDuration(windowMs)} is longer than the maximum of ${formatDuration(MAXIMUM_REPLAY_WINDOW_MS)} (100 years): ` +
      "check the number and its unit (e.g. 14d, 36h)",
    );
  }
  if (windowMs < minimum && !options.force) {
    throw new RetentionGuardError(
      `replay window ${formatDuration(windowMs)} is shorter than the minimum of ${formatDuration(minimum)}: ` +
      "records purged this early let a redelivered or replayed event apply again; use force (--force) if you really mean it",
    );
  }
}

