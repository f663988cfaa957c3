import type { ErrorCode } from "../core/error-catalogue.js";
import { InboxError } from "../core/errors.js";

/**
 * The one place a failure becomes an HTTP status: by its catalogue code, never by its message.
 * A code not listed here, or an error without one, is the console's own failure: 500.
 */
const STATUS_OF_CODE: Partial<Record<ErrorCode, number>> = {
  RI_CONSOLE_INVALID_REQUEST: 400,
  RI_QUARANTINE_OPTIONS: 400,
  RI_CONSOLE_UNAUTHENTICATED: 401,
  RI_CONSOLE_FORBIDDEN: 403,
  RI_CONSOLE_NOT_FOUND: 404,
  RI_QUARANTINE_NOT_FOUND: 404,
  RI_CONSOLE_METHOD_NOT_ALLOWED: 405,
  // The entry (or the selection) cannot take the action as it stands now: look again, then decide.
  RI_QUARANTINE_OPERATION: 409,
  RI_QUARANTINE_DECIDED: 409,
  RI_CONSOLE_SELECTION_CHANGED: 409,
  RI_CONSOLE_BODY_TOO_LARGE: 413,
  RI_CONSOLE_UNSUPPORTED_MEDIA_TYPE: 415,
  RI_CONSOLE_THROTTLED: 429,
  RI_CONSOLE_NO_BROKER: 503,
};

export function statusOfCode(code: string): number {
  return STATUS_OF_CODE[code as ErrorCode] ?? 500;
}

export function httpStatusOf(error: unknown): number {
  return error instanceof InboxError ? statusOfCode(error.code) : 500;
}
