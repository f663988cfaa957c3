import { Logger as NestLogger } from "@nestjs/common";
import type { Logger } from "../core/logger.js";
import { escapeJsonControlCharacters } from "../core/control-characters.js";
import { redactSecrets } from "../core/redact-secrets.js";

/**
 * The library's log lines through Nest's Logger: the message, then its fields as JSON, with
 * passwords masked and control characters escaped as the library's own logger does (fields can
 * carry what a producer sent, and Nest's logger writes to a terminal), under `context`.
 */
export function nestLogger(context = "RabbitInbox"): Logger {
  const logger = new NestLogger(context);
  const line = (msg: string, fields?: Record<string, unknown>) => {
    if (!fields || Object.keys(fields).length === 0) return msg;
    return `${msg} ${escapeJsonControlCharacters(redactSecrets(JSON.stringify(fields, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value))))}`;
  };
  return {
    debug: (msg, fields) => logger.debug(line(msg, fields)),
    info: (msg, fields) => logger.log(line(msg, fields)),
    warn: (msg, fields) => logger.warn(line(msg, fields)),
    error: (msg, fields) => logger.error(line(msg, fields)),
  };
}
