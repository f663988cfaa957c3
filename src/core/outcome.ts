import type { EventKey } from "./event.js";
import type { QuarantineRecord } from "./store.js";

/**
 * The settle decision for one delivery, explicit rather than an accident of control flow.
 * - applied / duplicate: ack.
 * - quarantined: the quarantine row committed; publish to the quarantine queue with confirms, then ack.
 * - requeue: nothing is known to be durable (database unreachable, commit outcome unknown):
 *   do not ack; give the delivery back to the broker and let the dedup record decide next time.
 */
export type Outcome =
  | { kind: "applied"; key: EventKey }
  | { kind: "duplicate"; key: EventKey }
  | { kind: "quarantined"; key: EventKey | null; reason: string; detail: string; record: QuarantineRecord }
  | { kind: "requeue"; key: EventKey | null; error: unknown };

export type OutcomeKind = Outcome["kind"];
