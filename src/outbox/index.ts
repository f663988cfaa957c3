export { Outbox, type OutboxTransactionOptions } from "./outbox.js";
export { OutboxRelay, type OutboxRelayOptions, type RelayFaultPoint, type RelayHook, type RelayRound } from "./outbox-relay.js";
export type { OutboxClaim, OutboxRelayStore, OutboxRow, OutboxSettlement, OutboxSubscription } from "./outbox-store.js";
export { OutboxSignal } from "./outbox-signal.js";
export { OutboxWriter, writeOutboxRecords } from "./outbox-writer.js";
export { outboxMessageId } from "./message-id.js";
export { sendableRows } from "./ordered-claim.js";
export { publishOptions } from "./relay-session.js";
export type { OutboxJsonValue, OutboxPublish, OutboxPublishOptions } from "./publish-options.js";
