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
});
