import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { throttleRepeats } from "../../src/core/log-throttle.js";
import type { Logger } from "../../src/core/logger.js";

interface Line { level: string; msg: string; fields: Record<string, unknown> | undefined }

function recorder(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => { lines.push({ level, msg, fields }); };
  return { lines, logger: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") } };
}

/** What the lines say happened: the first occurrence counts 1, a line with `repeated: n` n more. */
const occurrences = (lines: readonly Line[]) => lines.reduce((n, l) => n + (typeof l.fields?.repeated === "number" ? l.fields.repeated : 1), 0);

describe("throttleRepeats", () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });

  it("100 identical failures within an interval: the first line at once, then one line carrying the count", () => {
    const { logger, lines } = recorder();
    const log = throttleRepeats(logger, { intervalMs: 60_000 });
    for (let i = 0; i < 100; i++) {
      log.warn("outbox publish failed; retrying later", { attempt: i + 1 });
      vi.advanceTimersByTime(100);
    }
    expect(lines).toEqual([{ level: "warn", msg: "outbox publish failed; retrying later", fields: { attempt: 1 } }]);
    vi.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toEqual({
      level: "warn", msg: "outbox publish failed; retrying later", fields: { attempt: 100, repeated: 99, repeatedWithinMs: 60_000 },
    });
    expect(occurrences(lines)).toBe(100);
    // Nothing more held back: no further line.
    vi.advanceTimersByTime(600_000);
    expect(lines).toHaveLength(2);
  });

  it("a failure repeating for 10 minutes writes one line per interval, and every occurrence is counted", () => {
    const { logger, lines } = recorder();
    const log = throttleRepeats(logger, { intervalMs: 60_000 });
    for (let i = 0; i < 600; i++) {
      log.error("outbox messages keep failing to publish", { i });
      vi.advanceTimersByTime(1000);
    }
    log.flush();
    expect(lines.length).toBeGreaterThanOrEqual(10);
    expect(lines.length).toBeLessThanOrEqual(12);
    expect(occurrences(lines)).toBe(600);
    expect(lines.every((l) => l.level === "error")).toBe(true);
  });

  it("different messages and levels never hide each other; a message quiet for an interval is written at once", () => {
    const { logger, lines } = recorder();
    const log = throttleRepeats(logger, { intervalMs: 1000 });
    log.warn("a");
    log.warn("b");
    log.error("a");
    log.warn("a");
    expect(lines.map((l) => `${l.level}:${l.msg}`)).toEqual(["warn:a", "warn:b", "error:a"]);
    vi.advanceTimersByTime(1000);
    expect(lines.map((l) => `${l.level}:${l.msg}:${String(l.fields?.repeated)}`)).toEqual(["warn:a:undefined", "warn:b:undefined", "error:a:undefined", "warn:a:1"]);
    vi.advanceTimersByTime(5000);
    log.warn("a", { again: true });
    expect(lines.at(-1)).toEqual({ level: "warn", msg: "a", fields: { again: true } });
  });

  it("flush writes what is held back now, once", () => {
    const { logger, lines } = recorder();
    const log = throttleRepeats(logger, { intervalMs: 60_000 });
    log.info("nudged");
    log.info("nudged");
    log.info("nudged");
    log.flush();
    log.flush();
    expect(lines.map((l) => l.fields?.repeated)).toEqual([undefined, 2]);
    vi.advanceTimersByTime(120_000);
    expect(lines).toHaveLength(2);
  });

  it("a repeat that arrives exactly one interval after the last line is written at once", () => {
    const { logger, lines } = recorder();
    let clock = 0;
    const log = throttleRepeats(logger, { intervalMs: 1000, now: () => clock });
    log.warn("database unavailable");
    clock = 1000;
    log.warn("database unavailable");
    expect(lines.map((l) => l.fields)).toEqual([undefined, undefined]);
  });

  it("a line written at once after a quiet interval carries the count still held back, and that count is not written again", () => {
    const { logger, lines } = recorder();
    let clock = 0;
    const log = throttleRepeats(logger, { intervalMs: 1000, now: () => clock });
    log.warn("publish refused", { attempt: 1 });
    clock = 10;
    log.warn("publish refused", { attempt: 2 });
    log.warn("publish refused", { attempt: 3 });
    // The clock passed the interval before the summary's timer ran (a busy event loop): the
    // next occurrence is written at once, with the two held back.
    clock = 1500;
    log.warn("publish refused", { attempt: 4 });
    expect(lines.map((l) => l.fields)).toEqual([{ attempt: 1 }, { attempt: 4, repeated: 2, repeatedWithinMs: 1000 }]);
    // The summary timer of the held occurrences is cancelled: they were counted once.
    vi.advanceTimersByTime(10_000);
    log.flush();
    expect(lines).toHaveLength(2);
  });

  it("throttles every level, debug included, under the level it was called at", () => {
    const { logger, lines } = recorder();
    const log = throttleRepeats(logger, { intervalMs: 1000 });
    for (const level of ["debug", "info", "warn", "error"] as const) {
      log[level]("same text");
      log[level]("same text");
    }
    log.flush();
    expect(lines.map((l) => `${l.level}:${String(l.fields?.repeated)}`)).toEqual([
      "debug:undefined", "info:undefined", "warn:undefined", "error:undefined", "debug:1", "info:1", "warn:1", "error:1",
    ]);
  });

  it("after a flush, a new burst is summed up one interval after the flush, not at the old timer's time", () => {
    const { logger, lines } = recorder();
    const log = throttleRepeats(logger, { intervalMs: 1000 });
    log.warn("x");
    vi.advanceTimersByTime(100);
    log.warn("x"); // held; its summary was due at 1000
    vi.advanceTimersByTime(400);
    log.flush(); // at 500: written now; the next summary is due at 1500
    log.warn("x"); // held again
    vi.advanceTimersByTime(600); // 1100: past the old timer's time
    expect(lines.map((l) => l.fields?.repeated)).toEqual([undefined, 1]);
    vi.advanceTimersByTime(400); // 1500
    expect(lines.map((l) => l.fields?.repeated)).toEqual([undefined, 1, 1]);
  });
});
