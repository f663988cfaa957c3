import type { Logger } from "../../src/core/logger.js";

/** One line a recording logger received, with its fields ({} when none were given). */
export interface LogLine { level: "debug" | "info" | "warn" | "error"; message: string; fields: Record<string, unknown> }

/** A Logger that keeps every line in `lines`, for tests that assert what an operator would read. */
export function recordingLogger(lines: LogLine[]): Logger {
  const at = (level: LogLine["level"]) => (message: string, fields: Record<string, unknown> = {}) => { lines.push({ level, message, fields }); };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** The lines with this exact message. */
export function logged(lines: readonly LogLine[], message: string): LogLine[] {
  return lines.filter((l) => l.message === message);
}
