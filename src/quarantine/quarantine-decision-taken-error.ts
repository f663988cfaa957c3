import { catalogued } from "../core/error-catalogue.js";
import type { AuditRecord } from "../core/store-contract/quarantine-admin.js";
import { QuarantineOperationError } from "./quarantine-operation-error.js";

/** Where the decision that stands in the way is: still running, or done. */
export type DecisionTaken = "under-way" | "done";

/**
 * A decision refused because another one on the same entry is under way or already done (a
 * replay not confirmed yet, a replay the inbox applied, a discard). It is a QuarantineOperationError
 * with a code of its own, so that a caller can tell "someone else got there first" from a request
 * that was wrong in itself: the console answers 409, the command exits 3.
 */
export class QuarantineDecisionTakenError extends QuarantineOperationError {
  constructor(message: string, readonly state: DecisionTaken, readonly decision: AuditRecord | null) {
    super(message);
    Object.defineProperty(this, "code", { value: catalogued("RI_QUARANTINE_DECIDED")[0] });
  }
}
