import { catalogued } from "../core/error-catalogue.js";
import { InboxError } from "../core/errors.js";

/** An operator action on a quarantine entry that cannot be done as asked (no such entry, wrong status, ...). */
export class QuarantineOperationError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(...catalogued("RI_QUARANTINE_OPERATION"), message, options);
  }
}
