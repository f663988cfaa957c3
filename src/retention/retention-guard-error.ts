import { catalogued } from "../core/error-catalogue.js";
import { InboxError } from "../core/errors.js";

/** Cleanup refused: no replay window configured, or one under the minimum without `force`. */
export class RetentionGuardError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(...catalogued("RI_RETENTION_GUARD"), message, options);
  }
}
