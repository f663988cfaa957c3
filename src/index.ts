// The package's root: what an application needs to consume, publish through the outbox and open
// a store. Operator tooling is in rabbit-inbox/operations, metrics and health types in
// rabbit-inbox/observability, each database's own store in its subpath. Every name here is a
// promise to keep: etc/api-report.md lists them, and a test holds this file to that list.
export { InboxConsumer, type InboxConsumerOptions } from "./amqp/inbox-consumer.js";
export { OutboxRelay, type OutboxRelayOptions } from "./outbox/outbox-relay.js";
export { Outbox } from "./outbox/outbox.js";
export { outboxMessageId } from "./core/outbox-message-id.js";
export type { OutboxPublish } from "./core/publish-options.js";
export { outboxBackpressure } from "./outbox/outbox-backpressure.js";
export type { Backpressure } from "./core/backpressure.js";
export { type OpenStoreOptions, type UrlStore, openStore } from "./store/open-store.js";
export { type DatabaseTarget, databaseTargetOf } from "./store/database-url.js";
export type { Store, StoreTransaction } from "./core/store-contract/store.js";
export type { OutboxRelayStore } from "./core/store-contract/outbox-relay-store.js";
export type { BatchItem, BatchRejection, DeliveryInfo, HandlerContext, InboxHandler } from "./core/handler.js";
export { type ParsedEvent, readId } from "./core/event.js";
export { type LogLevel, type Logger, createJsonLogger } from "./core/logger.js";
export {
  BrokerUnreachableError, CommitOutcomeUnknownError, type ErrorKind, InboxConfigError, InboxError, InvalidEventError, InvalidPublishError,
  PermanentEventError, QuarantinePublishError, RetryLaterError, StoreUnavailableError, TransientStoreError,
} from "./core/errors.js";
