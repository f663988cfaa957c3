import type { EventKey } from "./event.js";
import type { QuarantineRecord } from "./store-contract/store.js";

/**
 * The settle decision for one delivery, explicit rather than an accident of control flow.
 * - applied / duplicate: ack.
 * - quarantined: the quarantine row committed; publish to the quarantine queue with confirms, then ack.
 * - delayed: transient failures outlived the in-process retries, or the handler said the event
 *   cannot apply yet (RetryLaterError); nothing of it was written. The broker layer republishes
 *   the message to a delay queue (with confirms) and then acks the original.
 * - requeue: nothing is known to be durable (database unreachable, commit outcome unknown):
 *   do not ack; give the delivery back to the broker and let the dedup record decide next time.
 */
export type Outcome =
  | { kind: "applied"; key: EventKey }
  | { kind: "duplicate"; key: EventKey }
  | { kind: "quarantined"; key: EventKey | null; reason: string; detail: string; record: QuarantineRecord }
  | { kind: "delayed"; key: EventKey | null; detail: string }
  | { kind: "requeue"; key: EventKey | null; error: unknown };

export type OutcomeKind = Outcome["kind"];
