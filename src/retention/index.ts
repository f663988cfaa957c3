export { type CleanupOptions, type CleanupReport, purgeExpiredDedupRecords } from "./cleanup.js";
export { formatDuration, parseDuration } from "./duration.js";
export { type StaleFenceOptions, eventTimeOf } from "../core/event-time.js";
export { MAXIMUM_REPLAY_WINDOW_MS, MINIMUM_REPLAY_WINDOW_MS, REPLAY_WINDOW_ENV, type ReplayWindow, checkReplayWindow, resolveReplayWindow } from "./replay-window.js";
export type { DedupSummary, PurgeBatchResult, PurgeHorizon, PurgeableRecords, QuarantineHold, RetentionStore } from "../core/store-contract/retention-admin.js";
export { RetentionGuardError } from "./replay-window.js";
