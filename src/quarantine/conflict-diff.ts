import type { QuarantineAdmin, QuarantineDetail } from "../core/store-contract/quarantine-admin.js";
import { QuarantineOperationError } from "./quarantine-errors.js";
import { noSuchEntry } from "./resolution-rules.js";
import { type PayloadChange, decodePayload, payloadChanges } from "./payload-diff.js";

export interface VersionView {
  fingerprint: string;
  /** The payload, when known: decoded JSON, or text. */
  payload: { json: true; value: unknown } | { json: false; text: string } | null;
  /** Where the payload comes from, e.g. `quarantine entry #4`. */
  source: string | null;
}

export interface ConflictDiff {
  entry: QuarantineDetail;
  stored: VersionView & {
    /** first_seen of the dedup record, or null when it was purged. */
    firstSeen: Date | null;
    /** True when the dedup record now holds another fingerprint than the one the conflict met. */
    replacedSince: boolean;
    /** Why the payload is missing, when it is. */
    note: string | null;
  };
  incoming: VersionView & { truncated: boolean };
  /** Path-level differences; empty when the stored payload is not known. */
  changes: PayloadChange[];
}

/**
 * The two versions of a conflict. The inbox keeps only a fingerprint of the version it applied
 * (payloads on the hot path would cost every event space and time), so the stored side's payload
 * comes from the quarantine's own history: an earlier entry of the same key whose fingerprint is
 * the stored one (a version that was quarantined, then replayed and applied, or accepted over an
 * earlier conflict). Without one, the diff shows the stored fingerprint and says so.
 */
export async function diffConflict(admin: QuarantineAdmin, id: number): Promise<ConflictDiff> {
  const entry = await admin.getQuarantineEntry(id);
  if (!entry) throw noSuchEntry(id);
  if (entry.reason !== "conflict" || !entry.storedFingerprint || !entry.fingerprint || !entry.tenant || !entry.eventId) {
    throw new QuarantineOperationError(`quarantine entry #${id} is not a conflict (reason ${entry.reason}): there is no second version to compare`);
  }
  const key = { tenant: entry.tenant, eventId: entry.eventId };
  const [dedup, earlier] = await Promise.all([
    admin.storedVersion(entry.handler, key),
    admin.findQuarantinedVersion(entry.handler, key, entry.storedFingerprint),
  ]);
  const incomingPayload = decodePayload(entry.body);
  const storedPayload = earlier && !earlier.bodyTruncated ? decodePayload(earlier.body) : null;
  const changes = storedPayload?.json && incomingPayload.json ? payloadChanges(storedPayload.value, incomingPayload.value) : [];
  let note: string | null = null;
  if (!earlier) {
    note = "the inbox keeps only the fingerprint of an applied version, and no quarantine entry holds this one: compare with the producer's record of the event";
  } else if (earlier.bodyTruncated) {
    note = `quarantine entry #${earlier.id} holds this version, but only its first ${earlier.body.length} bytes`;
  }
  return {
    entry,
    stored: {
      fingerprint: entry.storedFingerprint, payload: storedPayload, source: earlier ? `quarantine entry #${earlier.id}` : null,
      firstSeen: dedup?.firstSeen ?? null, replacedSince: dedup !== null && dedup.fingerprint !== entry.storedFingerprint, note,
    },
    incoming: { fingerprint: entry.fingerprint, payload: incomingPayload, source: `quarantine entry #${entry.id}`, truncated: entry.bodyTruncated },
    changes,
  };
}
