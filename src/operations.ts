// rabbit-inbox/operations: what an operator's tooling needs (the `rabbit-inbox` command and the
// console are built on the same functions): quarantine decisions, retention, the outbox's
// backlog, the console handler, fault injection, and output that is safe to print.
export type {
  AuditRecord, QuarantineAdmin, QuarantineCount, QuarantineDetail, QuarantineFilter, QuarantineStatus,
} from "./core/store-contract/quarantine-admin.js";
export {
  type ConfirmedPublish, type ReplayMessage, type ReplayRequest, type ReplayResult, REPLAY_AUDIT_HEADER, REPLAY_BY_HEADER, REPLAY_OF_HEADER,
  replayQuarantineEntry,
} from "./quarantine/replay.js";
export { discardQuarantineEntry } from "./quarantine/discard.js";
export { AmqpReplayPublisher } from "./quarantine/amqp-replay-publisher.js";
export { type QuarantineGroup, quarantineGroups } from "./quarantine/quarantine-groups.js";
export { selectQuarantineEntries } from "./quarantine/quarantine-selection.js";
export { type ConflictDiff, diffConflict } from "./quarantine/conflict-diff.js";
export type { BulkProgress, BulkResult } from "./quarantine/bulk-operation.js";
export { type BulkReplayOptions, bulkReplay } from "./quarantine/bulk-replay.js";
export { type BulkDiscardOptions, bulkDiscard } from "./quarantine/discard.js";
export { QuarantineDecisionTakenError, QuarantineOperationError } from "./quarantine/quarantine-errors.js";
export { type CleanupOptions, type CleanupReport, purgeExpiredDedupRecords } from "./retention/cleanup.js";
export { formatDuration, parseDuration } from "./retention/duration.js";
export { RetentionGuardError } from "./retention/replay-window.js";
export type { FailingOutboxRow, OutboxBacklog } from "./core/store-contract/outbox-admin.js";
export { type CompleteStore, type InboxOperations, hasOperations, hasOutboxRelay, isCompleteStore } from "./core/store-contract/capabilities.js";
export { type ConsoleHandler, createConsoleHandler } from "./console/console-handler.js";
export type { ConsoleOptions } from "./console/console-context.js";
export { type FaultSpec, faultInjection, parseFaultSpec } from "./fault/fault-injection.js";
export { describeAmqpConnectError } from "./amqp/describe-connect-error.js";
export { redactSecrets } from "./core/redact-secrets.js";
export { escapeControlCharacters, escapeJsonControlCharacters } from "./core/control-characters.js";
