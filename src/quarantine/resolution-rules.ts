import type { AuditRecord, QuarantineDetail, ResolutionRequest } from "../core/store-contract/quarantine-admin.js";
import { QuarantineDecisionTakenError, QuarantineOperationError } from "./quarantine-errors.js";

export function noSuchEntry(id: number): QuarantineOperationError {
  return new QuarantineOperationError(`no quarantine entry #${id}`, { code: "RI_QUARANTINE_NOT_FOUND" });
}

/**
 * What a store reads about an entry, in the transaction that takes a decision on it and under the
 * entry's row lock (or SQLite's write lock): two decisions on one entry therefore see each other.
 */
export interface ResolutionState {
  /** The entry's latest decision, if any. */
  latest: AuditRecord | null;
  /** The fingerprint the dedup record of the entry's key holds now; null without a record (or a key). */
  storedFingerprint: string | null;
}

/**
 * Where an entry stands for an operator:
 * - `held`: waiting for a decision;
 * - `discarded`: given up for good;
 * - `replaying`: a replay committed and not yet confirmed by the broker (or failed): under way;
 * - `applied`: replayed, and the inbox holds this very version (the consumer applied it);
 * - `on-its-way`: replayed and confirmed, not applied yet: the message waits in a queue (or was lost).
 */
export type DecisionStanding = "held" | "discarded" | "replaying" | "applied" | "on-its-way";

export function decisionStanding(entry: QuarantineDetail, state: ResolutionState): DecisionStanding {
  if (entry.status === "held") return "held";
  if (entry.status === "discarded") return "discarded";
  const replay = state.latest?.action === "replay" ? state.latest : null;
  if (replay && replay.publishedAt === null && replay.failure === null) return "replaying";
  if (entry.fingerprint !== null && state.storedFingerprint === entry.fingerprint) return "applied";
  return "on-its-way";
}

const at = (d: Date) => d.toISOString();

/** `(audit #7 by ops@host at <time>[, confirmed at <time>])`: the decision in the way. */
function decisionText(a: AuditRecord | null): string {
  if (!a) return "";
  return ` (audit #${a.id} by ${a.actor} at ${at(a.at)}${a.publishedAt ? `, confirmed at ${at(a.publishedAt)}` : ""})`;
}

/**
 * The rules every store applies before recording a decision, shared so all dialects refuse
 * alike. One decision at a time per entry: a replay under way refuses every other decision; an
 * entry replayed and applied is done (replaying it again would publish a duplicate, discarding it
 * would mark an applied event discarded); one replayed but not applied yet is on its way, so a
 * second replay needs `again` (its first copy was lost) and a discard is refused (a replayed entry
 * holds nothing back, and comes back `held` if the consumer quarantines it again).
 */
export function checkResolvable(entry: QuarantineDetail, request: ResolutionRequest, state: ResolutionState): void {
  if (request.acceptNew && request.acceptStale) throw new QuarantineOperationError("choose accept-new or accept-stale, not both", { code: "RI_QUARANTINE_OPTIONS" });
  if (request.action === "discard" && (request.acceptNew || request.acceptStale)) {
    throw new QuarantineOperationError("accept-new and accept-stale only apply to a replay", { code: "RI_QUARANTINE_OPTIONS" });
  }
  const standing = decisionStanding(entry, state);
  const id = `quarantine entry #${entry.id}`;
  if (standing === "discarded") {
    throw new QuarantineDecisionTakenError(`${id} was discarded${decisionText(state.latest)}; it cannot be ${request.action === "replay" ? "replayed" : "discarded again"}`, "done", state.latest);
  }
  if (request.onlyIfHeld && standing !== "held") {
    throw new QuarantineOperationError(`${id} is no longer held (it was ${entry.status}): left alone`);
  }
  if (standing === "replaying") {
    throw new QuarantineDecisionTakenError(
      `${id} is being replayed${decisionText(state.latest)}: the broker has not confirmed it yet; wait for it (if the process that made it died, a bulk replay whose filter selects this entry finishes it: see docs/operations.md)`,
      "under-way", state.latest,
    );
  }
  if (standing === "applied") {
    throw new QuarantineDecisionTakenError(
      `${id} was replayed${decisionText(state.latest)} and applied: the inbox holds this version; ${request.action === "replay" ? "nothing to replay" : "discarding it would mark an applied event discarded"}`,
      "done", state.latest,
    );
  }
  if (standing === "on-its-way" && (request.action === "discard" || !request.again)) {
    throw new QuarantineDecisionTakenError(
      `${id} was replayed${decisionText(state.latest)} and is not applied yet: its message is on its way to the consumer; ${request.action === "discard"
        ? "a replayed entry holds nothing back and is held again if it comes back to quarantine, so it cannot be discarded"
        : "replay it again only if that copy was lost (a purged queue), and say so (again: true; rabbit-inbox quarantine replay --again)"}`,
      "done", state.latest,
    );
  }
  if (request.acceptNew && (entry.reason !== "conflict" || !entry.storedFingerprint || !entry.fingerprint || !entry.tenant || !entry.eventId)) {
    throw new QuarantineOperationError(`${id} is not a conflict (reason ${entry.reason}): accept-new only applies to conflicts`);
  }
  if (request.acceptStale && (!entry.fingerprint || !entry.tenant || !entry.eventId)) {
    throw new QuarantineOperationError(`${id} has no event key: accept-stale needs one`);
  }
  if (request.action === "replay" && entry.bodyTruncated) {
    throw new QuarantineOperationError(
      `${id} kept only the first ${entry.body.length} bytes of its body: republish the full copy from the quarantine queue instead`,
    );
  }
  if (request.acceptNew) checkStoredStillSame(entry, state.storedFingerprint);
}

/** accept-new is granted against the stored version the operator saw, and nothing else. */
function checkStoredStillSame(entry: QuarantineDetail, current: string | null): void {
  if (current === null) {
    throw new QuarantineOperationError(
      `the dedup record of event ${entry.eventId} (tenant ${entry.tenant}) is gone (purged?): a plain replay would apply this version without replacing anything`,
    );
  }
  if (current !== entry.storedFingerprint) {
    throw new QuarantineOperationError(
      `the stored version of event ${entry.eventId} (tenant ${entry.tenant}) changed since the conflict (now ${current.slice(0, 12)}, entry expects ${entry.storedFingerprint?.slice(0, 12)}): look again before choosing`,
    );
  }
}

/** The options an audit record keeps: `again` only when it let a second replay through. */
export function resolutionOptions(entry: QuarantineDetail, request: ResolutionRequest): string {
  return [request.acceptNew ? "accept-new" : "", request.acceptStale ? "accept-stale" : "", request.again && entry.status === "replayed" ? "again" : ""]
    .filter(Boolean).join(",");
}
