import type { QuarantineDetail, ResolutionRequest } from "./quarantine-admin.js";
import { QuarantineOperationError } from "./quarantine-operation-error.js";

export function noSuchEntry(id: number): QuarantineOperationError {
  return new QuarantineOperationError(`no quarantine entry #${id}`);
}

/** The rules every store applies before recording a decision; shared so all dialects refuse alike. */
export function checkResolvable(entry: QuarantineDetail, request: ResolutionRequest): void {
  if (entry.status === "discarded") {
    throw new QuarantineOperationError(`quarantine entry #${entry.id} was discarded; it cannot be ${request.action === "replay" ? "replayed" : "discarded again"}`);
  }
  if (request.onlyIfHeld && entry.status !== "held") {
    throw new QuarantineOperationError(`quarantine entry #${entry.id} is no longer held (it was ${entry.status}): left alone`);
  }
  if (request.acceptNew && request.acceptStale) throw new QuarantineOperationError("choose accept-new or accept-stale, not both");
  if (request.action === "discard" && (request.acceptNew || request.acceptStale)) {
    throw new QuarantineOperationError("accept-new and accept-stale only apply to a replay");
  }
  if (request.acceptNew && (entry.reason !== "conflict" || !entry.storedFingerprint || !entry.fingerprint || !entry.tenant || !entry.eventId)) {
    throw new QuarantineOperationError(`quarantine entry #${entry.id} is not a conflict (reason ${entry.reason}): accept-new only applies to conflicts`);
  }
  if (request.acceptStale && (!entry.fingerprint || !entry.tenant || !entry.eventId)) {
    throw new QuarantineOperationError(`quarantine entry #${entry.id} has no event key: accept-stale needs one`);
  }
  if (request.action === "replay" && entry.bodyTruncated) {
    throw new QuarantineOperationError(
      `quarantine entry #${entry.id} kept only the first ${entry.body.length} bytes of its body: republish the full copy from the quarantine queue instead`,
    );
  }
}

/** accept-new is granted against the stored version the operator saw, and nothing else. */
export function checkStoredStillSame(entry: QuarantineDetail, current: string | null): void {
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

export function resolutionOptions(request: ResolutionRequest): string {
  return [request.acceptNew ? "accept-new" : "", request.acceptStale ? "accept-stale" : ""].filter(Boolean).join(",");
}
