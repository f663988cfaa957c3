import { catalogued } from "../core/error-catalogue.js";
import { InboxError } from "../core/errors.js";
import type { AuditRecord } from "../core/store-contract/quarantine-admin.js";

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
