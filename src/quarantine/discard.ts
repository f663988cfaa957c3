import type { AuditRecord, QuarantineAdmin } from "../core/store-contract/quarantine-admin.js";

/**
 * Discards a quarantine entry: it stops blocking cleanup and is never replayed. The entry stays
 * (status `discarded`) with an audit record of who, when and why.
 */
export async function discardQuarantineEntry(admin: QuarantineAdmin, request: { id: number; actor: string; reason: string }): Promise<AuditRecord> {
  if (request.reason.trim() === "") throw new RangeError("a discard needs a reason");
  return admin.beginResolution(request.id, { action: "discard", actor: request.actor, reason: request.reason });
}
