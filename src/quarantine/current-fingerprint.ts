import type { QuarantineAdmin, QuarantineDetail } from "../core/store-contract/quarantine-admin.js";

/**
 * The fingerprint the inbox holds now for an entry's event, or null (no key, or no dedup record).
 * A conflict's `storedFingerprint` is the version it met; after an accepted new version the
 * inbox holds that one instead, and what an operator is told must follow it.
 */
export async function currentFingerprint(admin: QuarantineAdmin, entry: QuarantineDetail): Promise<string | null> {
  if (entry.tenant === null || entry.eventId === null) return null;
  return (await admin.storedVersion(entry.handler, { tenant: entry.tenant, eventId: entry.eventId }))?.fingerprint ?? null;
}
