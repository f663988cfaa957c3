import { type ErrorCode, catalogued } from "../core/error-catalogue.js";
import { InboxError } from "../core/errors.js";
import { httpStatusOf } from "./http-status.js";

/** The console's own refusals; each code alone decides the HTTP status (http-status.ts). */
export type ConsoleErrorCode = Extract<ErrorCode, `RI_CONSOLE_${string}`>;

/** A request the console cannot serve as asked; the message says what to fix. */
export class ConsoleRequestError extends InboxError {
  /** The parameter or body field at fault, as the request named it (`filter.since`). */
  readonly field: string | undefined;
  /** Headers the answer carries (`Retry-After`, `Allow`, `WWW-Authenticate`). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ConsoleErrorCode, message: string, options: { field?: string; headers?: Record<string, string>; cause?: unknown } = {}) {
    super(...catalogued(code), message, options);
    this.field = options.field;
    this.headers = options.headers ?? {};
  }

  get status(): number {
    return httpStatusOf(this);
  }
}

/** A parameter or body field that cannot mean anything: a 400 naming it. */
export function invalidField(field: string, message: string): ConsoleRequestError {
  return new ConsoleRequestError("RI_CONSOLE_INVALID_REQUEST", message, { field });
}
