import type { Logger } from "./logger.js";

/** A logger that collapses repeated lines; `flush` writes what it still holds back. */
export interface ThrottledLogger extends Logger {
  /** Writes the summary line of every message held back so far, now (call it when stopping). */
  flush(): void;
}

export interface LogThrottleOptions {
  /** At most one line per message and level in this many ms (the first at once). */
  intervalMs: number;
  /** Clock, for tests. Default Date.now. */
  now?: () => number;
}

type Level = "debug" | "info" | "warn" | "error";

interface Held {
  level: Level;
  message: string;
  /** When this message last reached the logger. */
  lastWrittenAt: number;
  /** Occurrences held back since then. */
  repeated: number;
  /** The fields of the latest occurrence held back: the summary line carries them. */
  fields: Record<string, unknown> | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Rate-limits repeated log lines. A failure that repeats every second (a broker that refuses
 * every publish, a database that is down) would otherwise write a line each time and bury
 * everything else: the first occurrence of a message (per level) is written at once; those
 * that follow within `intervalMs` are only counted, and one line per interval then says how
 * many there were (`repeated: n`, with the latest occurrence's fields). A message that stays
 * quiet for an interval is written at once again. Different messages never hide each other.
 */
export function throttleRepeats(logger: Logger, options: LogThrottleOptions): ThrottledLogger {
  const interval = options.intervalMs;
  const now = options.now ?? Date.now;
  const held = new Map<string, Held>();

  const writeSummary = (entry: Held) => {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = undefined;
    if (entry.repeated === 0) return;
    logger[entry.level](entry.message, { ...entry.fields, repeated: entry.repeated, repeatedWithinMs: interval });
    entry.repeated = 0;
    entry.fields = undefined;
    entry.lastWrittenAt = now();
  };

  const log = (level: Level) => (message: string, fields?: Record<string, unknown>) => {
    const key = `${level}\u0000${message}`;
    const entry = held.get(key);
    const at = now();
    if (!entry || at - entry.lastWrittenAt >= interval) {
      // Quiet for an interval (or never seen): write it, with what was held back before it.
      const repeated = entry?.repeated ?? 0;
      if (entry?.timer) clearTimeout(entry.timer);
      logger[level](message, repeated > 0 ? { ...fields, repeated, repeatedWithinMs: interval } : fields);
      held.set(key, { level, message, lastWrittenAt: at, repeated: 0, fields: undefined, timer: undefined });
      return;
    }
    entry.repeated++;
    entry.fields = fields;
    if (!entry.timer) {
      entry.timer = setTimeout(() => writeSummary(entry), Math.max(0, entry.lastWrittenAt + interval - at));
      // A held-back count never keeps the process alive.
      entry.timer.unref?.();
    }
  };

  return {
    debug: log("debug"),
    info: log("info"),
    warn: log("warn"),
    error: log("error"),
    flush: () => {
      for (const entry of held.values()) writeSummary(entry);
    },
  };
}
