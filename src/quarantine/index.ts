export type {
  AuditLogPage, AuditRecord, QuarantineAction, QuarantineAdmin, QuarantineCount, QuarantineDetail, QuarantineFilter, QuarantineStatus,
  ResolutionRequest, StoredVersion,
} from "../core/store-contract/quarantine-admin.js";
export { type DecisionTaken, QuarantineDecisionTakenError, QuarantineOperationError } from "./quarantine-errors.js";
export { type ConflictDiff, type VersionView, diffConflict } from "./conflict-diff.js";
export { type PayloadChange, decodePayload, payloadChanges } from "./payload-diff.js";
export {
  type ConfirmedPublish, type ReplayMessage, type ReplayRequest, type ReplayResult, REPLAY_AUDIT_HEADER, REPLAY_BY_HEADER, REPLAY_OF_HEADER,
  replayMessage, replayQuarantineEntry,
} from "./replay.js";
export { discardQuarantineEntry } from "./discard.js";
export { AmqpReplayPublisher } from "./amqp-replay-publisher.js";
export type { QuarantineCauseCount } from "../core/store-contract/quarantine-admin.js";
export { CAUSE_PREFIX_CHARS, groupKeyOf, groupKeyOfEntry, normaliseCause } from "./quarantine-cause.js";
export { type QuarantineGroup, quarantineGroups } from "./quarantine-groups.js";
export { selectQuarantineEntries } from "./quarantine-selection.js";
export { type BulkProgress, type BulkResult } from "./bulk-operation.js";
export { type BulkReplayOptions, bulkReplay } from "./bulk-replay.js";
export { type BulkDiscardOptions, bulkDiscard } from "./discard.js";
