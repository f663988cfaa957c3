import type { ErrorKind } from "./error-catalogue.js";
import { InboxConfigError } from "./errors.js";

/**
 * What the pipeline does when a transaction attempt throws, as ONE table: error kind x
 * situation -> action. docs/failure-modes.md ("What a failed transaction leads to") shows the
 * same table, and a test holds the two together.
 *
 * Actions:
 * - `retry`: run the whole transaction again in process, after a backoff delay.
 * - `isolate`: split the batch; each message runs in a transaction of its own, so only the
 *   message responsible meets the failure's consequence.
 * - `set-aside`: run the transaction again without the lone event, which is quarantined with
 *   its reason (or, for retry-later, delayed while the broker can still delay it).
 * - `delay`: hand the message to the broker's delayed-retry queues (outcome `delayed`).
 * - `quarantine`: quarantine the message as `retries_exhausted`.
 * - `requeue`: nothing is known to be durable; give the deliveries back to the broker.
 * - `fail`: `process()` rejects with the error: a misconfiguration is not the event's fault, and
 *   retrying, delaying or quarantining would hide it.
 */
export type FailureAction = "retry" | "isolate" | "set-aside" | "delay" | "quarantine" | "requeue" | "fail";

/**
 * The facts a row can depend on. `any` in a row: the fact does not matter for that row.
 * - messages: more than one message in the transaction (`several`) or one.
 * - retries: in-process attempts `left` (the next one fits both maxAttempts and maxTotalMs), or `exhausted`.
 * - delayedRetry: whether the broker layer can still schedule a delayed retry for the lone message.
 * - refusable: the lone message is a valid event not yet set aside, so the transaction can run
 *   again without it (`yes`); `no` for an invalid message or one already set aside.
 */
export interface FailureRow {
  kind: ErrorKind;
  messages: "several" | "one" | "any";
  retries: "left" | "exhausted" | "any";
  delayedRetry: "available" | "none left" | "any";
  refusable: "yes" | "no" | "any";
  action: FailureAction;
}

/** Rows never overlap, and every kind x situation has exactly one row (tested). */
export const failureTable: readonly FailureRow[] = [
  { kind: "transient", messages: "any", retries: "left", delayedRetry: "any", refusable: "any", action: "retry" },
  { kind: "transient", messages: "several", retries: "exhausted", delayedRetry: "any", refusable: "any", action: "isolate" },
  { kind: "transient", messages: "one", retries: "exhausted", delayedRetry: "available", refusable: "any", action: "delay" },
  { kind: "transient", messages: "one", retries: "exhausted", delayedRetry: "none left", refusable: "any", action: "quarantine" },
  { kind: "connection", messages: "any", retries: "left", delayedRetry: "any", refusable: "any", action: "retry" },
  { kind: "connection", messages: "any", retries: "exhausted", delayedRetry: "any", refusable: "any", action: "requeue" },
  { kind: "commit-unknown", messages: "any", retries: "any", delayedRetry: "any", refusable: "any", action: "requeue" },
  { kind: "permanent", messages: "several", retries: "any", delayedRetry: "any", refusable: "any", action: "isolate" },
  { kind: "permanent", messages: "one", retries: "any", delayedRetry: "any", refusable: "yes", action: "set-aside" },
  { kind: "permanent", messages: "one", retries: "any", delayedRetry: "any", refusable: "no", action: "quarantine" },
  { kind: "retry-later", messages: "several", retries: "any", delayedRetry: "any", refusable: "any", action: "isolate" },
  { kind: "retry-later", messages: "one", retries: "any", delayedRetry: "any", refusable: "yes", action: "set-aside" },
  { kind: "retry-later", messages: "one", retries: "any", delayedRetry: "any", refusable: "no", action: "quarantine" },
  { kind: "config", messages: "any", retries: "any", delayedRetry: "any", refusable: "any", action: "fail" },
];

/**
 * The situation of a failed attempt. `delayedRetry` is asked only when a row needs it: asking
 * the broker layer is not free, and it is asked once per decision at most.
 */
export interface FailureSituation {
  messages: number;
  retriesLeft: boolean;
  delayedRetry: () => boolean;
  refusable: boolean;
}

/**
 * The action for an error of `kind` in `situation`. A kind the table does not know (a user's
 * own InboxError subclass with a kind of its own) is taken as transient, like any error that is
 * not the library's.
 */
export function decideFailure(kind: ErrorKind, situation: FailureSituation, table: readonly FailureRow[] = failureTable): FailureAction {
  const known = table.some((row) => row.kind === kind);
  const rows = table.filter((row) => row.kind === (known ? kind : "transient"));
  let delayed: boolean | undefined;
  const delayedRetry = () => (delayed ??= situation.delayedRetry());
  const row = rows.find((r) =>
    (r.messages === "any" || r.messages === (situation.messages > 1 ? "several" : "one"))
    && (r.retries === "any" || r.retries === (situation.retriesLeft ? "left" : "exhausted"))
    && (r.refusable === "any" || r.refusable === (situation.refusable ? "yes" : "no"))
    && (r.delayedRetry === "any" || r.delayedRetry === (delayedRetry() ? "available" : "none left")));
  // The shipped table covers every situation (tested); a table given by a test may not.
  if (!row) throw new InboxConfigError(`the failure table has no row for an error of kind ${kind} in this situation`);
  return row.action;
}
