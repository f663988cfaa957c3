/**
 * The default logger: one JSON object per line, the level chosen by option or by
 * RABBIT_INBOX_LOG_LEVEL, and fields that cannot overwrite the record's own keys. Operators'
 * log pipelines parse these lines, so their shape is the contract. (Passwords and control
 * characters: redact-secrets.test.ts and control-characters.test.ts.)
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createJsonLogger, type LogLevel, silentLogger } from "../../src/core/logger.js";

function capture(options: { level?: LogLevel; name?: string } = {}) {
  const lines: string[] = [];
  const logger = createJsonLogger({ ...options, write: (line) => lines.push(line) });
  const records = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, lines, records };
}

function logEveryLevel(logger: ReturnType<typeof createJsonLogger>) {
  logger.debug("d");
  logger.info("i");
  logger.warn("w");
  logger.error("e");
}

afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
});

describe("createJsonLogger", () => {
  it("writes one JSON record per call: time, level, logger name, message, then the fields", () => {
    const { logger, lines, records } = capture();
    const before = Date.now();
    logger.warn("transaction failed, retrying", { handler: "ledger", attempt: 2, delayMs: 40 });
    const after = Date.now();
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain("\n");
    const [record] = records();
    expect(Object.keys(record!)).toEqual(["time", "level", "logger", "msg", "handler", "attempt", "delayMs"]);
    expect(record).toMatchObject({ level: "warn", logger: "rabbit-inbox", msg: "transaction failed, retrying", handler: "ledger", attempt: 2, delayMs: 40 });
    // An ISO timestamp of the moment of the call (log pipelines sort and index by it).
    const time = record!.time as string;
    expect(new Date(time).toISOString()).toBe(time);
    expect(Date.parse(time)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(time)).toBeLessThanOrEqual(after);
  });

  it("names each record's level after the method called", () => {
    const { logger, records } = capture({ level: "debug" });
    logEveryLevel(logger);
    expect(records().map((r) => [r.level, r.msg])).toEqual([["debug", "d"], ["info", "i"], ["warn", "w"], ["error", "e"]]);
  });

  it("takes the logger name from the options", () => {
    const { logger, records } = capture({ name: "ledger-consumer" });
    logger.info("started");
    expect(records()[0]).toMatchObject({ logger: "ledger-consumer", msg: "started" });
  });

  it("writes info and above by default, and nothing below the configured level", () => {
    const byDefault = capture();
    logEveryLevel(byDefault.logger);
    expect(byDefault.records().map((r) => r.msg)).toEqual(["i", "w", "e"]);

    const warn = capture({ level: "warn" });
    logEveryLevel(warn.logger);
    expect(warn.records().map((r) => r.msg)).toEqual(["w", "e"]);

    const error = capture({ level: "error" });
    logEveryLevel(error.logger);
    expect(error.records().map((r) => r.msg)).toEqual(["e"]);

    const silent = capture({ level: "silent" });
    logEveryLevel(silent.logger);
    expect(silent.lines).toEqual([]);
  });

  it("reads the level from RABBIT_INBOX_LOG_LEVEL when no option sets it; the option wins", () => {
    vi.stubEnv("RABBIT_INBOX_LOG_LEVEL", "debug");
    const fromEnv = capture();
    logEveryLevel(fromEnv.logger);
    expect(fromEnv.records().map((r) => r.msg)).toEqual(["d", "i", "w", "e"]);

    const option = capture({ level: "error" });
    logEveryLevel(option.logger);
    expect(option.records().map((r) => r.msg)).toEqual(["e"]);

    vi.stubEnv("RABBIT_INBOX_LOG_LEVEL", "silent");
    const silenced = capture();
    logEveryLevel(silenced.logger);
    expect(silenced.lines).toEqual([]);
  });

  it("falls back on info for a level it does not know, rather than writing everything or nothing", () => {
    vi.stubEnv("RABBIT_INBOX_LOG_LEVEL", "verbose");
    const { logger, records } = capture();
    logEveryLevel(logger);
    expect(records().map((r) => r.msg)).toEqual(["i", "w", "e"]);
  });

  it("never lets a field overwrite the record's own keys, and leaves out undefined fields", () => {
    const { logger, records } = capture();
    logger.error("quarantined", { msg: "forged", level: "debug", time: "never", logger: "other", tenant: "t1", eventId: undefined, detail: null });
    const [record] = records();
    expect(record).toEqual({ time: expect.any(String) as string, level: "error", logger: "rabbit-inbox", msg: "quarantined", tenant: "t1", detail: null });
    expect(record!.time).not.toBe("never");
    expect("eventId" in record!).toBe(false);
  });

  it("writes bigint fields as decimal strings, and leaves other values as they are", () => {
    const { logger, records } = capture();
    logger.info("counted", { rows: 12345678901234567890n, batch: 3, ok: true, name: "x" });
    expect(records()[0]).toMatchObject({ rows: "12345678901234567890", batch: 3, ok: true, name: "x" });
  });

  it("writes to stderr, one line per record, by default", () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    createJsonLogger({ level: "info" }).info("to stderr", { a: 1 });
    expect(written).toHaveLength(1);
    expect(written[0]!.endsWith("}\n")).toBe(true);
    expect(JSON.parse(written[0]!)).toMatchObject({ msg: "to stderr", a: 1 });
  });
});

describe("silentLogger", () => {
  it("writes nothing at any level", () => {
    const spy = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const log = vi.spyOn(console, "log");
    silentLogger.debug("d");
    silentLogger.info("i");
    silentLogger.warn("w");
    silentLogger.error("e", { a: 1 });
    expect(spy).not.toHaveBeenCalled();
    expect(log).not.toHaveBeenCalled();
  });
});
