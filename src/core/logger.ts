import { escapeJsonControlCharacters } from "./control-characters.js";
import { redactSecrets } from "./redact-secrets.js";

/** Structured logger: a message and flat fields. Plug pino, winston or console in. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";
const order: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

// Every record passes through it, so connection strings and their passwords never reach a log.
export { redactSecrets } from "./redact-secrets.js";

/** One JSON object per line on stderr, without passwords or raw control characters; the default logger. Level from RABBIT_INBOX_LOG_LEVEL. */
export function createJsonLogger(options: { level?: LogLevel; name?: string; write?: (line: string) => void } = {}): Logger {
  const envLevel = process.env.RABBIT_INBOX_LOG_LEVEL as LogLevel | undefined;
  const level = order[options.level ?? envLevel ?? "info"] ?? order.info;
  const write = options.write ?? ((line: string) => process.stderr.write(line + "\n"));
  const emit = (lvl: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (order[lvl] < level) return;
    const record: Record<string, unknown> = { time: new Date().toISOString(), level: lvl, logger: options.name ?? "rabbit-inbox", msg: message };
    for (const [key, value] of Object.entries(fields ?? {})) if (!(key in record) && value !== undefined) record[key] = value;
    write(escapeJsonControlCharacters(redactSecrets(JSON.stringify(record, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)))));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
