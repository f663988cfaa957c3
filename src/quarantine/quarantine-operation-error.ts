import { catalogued } from "../core/error-catalogue.js";
import { InboxError } from "../core/errors.js";

/**
 * What an operator action was refused for, so a caller can answer by the code: the entry cannot
 * take the action as it stands (`RI_QUARANTINE_OPERATION`, the default), there is no such entry
 * (`RI_QUARANTINE_NOT_FOUND`), or the request contradicts itself whatever the entry
 * (`RI_QUARANTINE_OPTIONS`).
 */
export type QuarantineOperationCode = "RI_QUARANTINE_OPERATION" | "RI_QUARANTINE_NOT_FOUND" | "RI_QUARANTINE_OPTIONS";

/** An operator action on a quarantine entry that cannot be done as asked (no such entry, wrong status, ...). */
export class QuarantineOperationError extends InboxError {
  constructor(message: string, options?: { cause?: unknown; code?: QuarantineOperationCode }) {
    super(...catalogued(options?.code ?? "RI_QUARANTINE_OPERATION"), message, options);
  }
}
