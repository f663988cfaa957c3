export type {
  AuditLogPage, AuditRecord, QuarantineAction, QuarantineAdmin, QuarantineCount, QuarantineDetail, QuarantineFilter, QuarantineStatus,
  ResolutionRequest, StoredVersion,
} from "./quarantine-admin.js";
export { QuarantineOperationError } from "./quarantine-operation-error.js";
export { type ConflictDiff, type VersionView, diffConflict } from "./conflict-diff.js";
export { type PayloadChange, decodePayload, payloadChanges } from "./payload-diff.js";
export {
  type ConfirmedPublish, type ReplayMessage, type ReplayRequest, type ReplayResult, REPLAY_AUDIT_HEADER, REPLAY_BY_HEADER, REPLAY_OF_HEADER,
  replayMessage, replayQuarantineEntry,
} from "./replay.js";
export { discardQuarantineEntry } from "./discard.js";
export { AmqpReplayPublisher } from "./amqp-replay-publisher.js";
