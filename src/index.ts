export * from "./core/errors.js";
export { type EventKey, type ParsedEvent, readId, defaultEventKey, MAX_ID_LENGTH } from "./core/event.js";
export { canonicalJson, fingerprintOf } from "./core/fingerprint.js";
export type { DeliveryInfo, HandlerContext, InboxHandler, BatchItem, BatchRejection } from "./core/handler.js";
export type { FaultPoint, PipelineHook } from "./core/pipeline.js";
export { type Logger, type LogLevel, createJsonLogger, silentLogger, redactSecrets } from "./core/logger.js";
export { escapeControlCharacters, escapeJsonControlCharacters } from "./core/control-characters.js";
export type { Outcome, OutcomeKind } from "./core/outcome.js";
export { InboxPipeline, type IncomingMessage, type PipelineOptions, DEFAULT_QUARANTINE_BODY_CAP } from "./core/pipeline.js";
export { type RetryPolicy, defaultRetryPolicy } from "./core/retry-policy.js";
export { type DecodeLimits, defaultDecodeLimits, decodeJsonBody } from "./core/decode.js";
export type { Store, StoreTransaction, InboxClaim, ClaimResult, QuarantineRecord, QuarantineEntry, DatabaseHealth } from "./core/store-contract/store.js";
export type { OutboxRecord, OutboxSource } from "./core/store-contract/store.js";
export type { Migration } from "./core/store-contract/capabilities.js";
export { InboxConsumer, type InboxConsumerOptions, type OutcomeCounts, type PartitionOptions } from "./amqp/inbox-consumer.js";
export type { ConsumerHealth } from "./amqp/consumer-health.js";
export type { RelayHealth } from "./outbox/relay-health.js";
export type { MetricsOptions } from "./observability/inbox-metrics.js";
export type { ProcessSpans } from "./core/instrumentation.js";
export { type BrokerUrls, BrokerConnector, type BrokerLink, brokerUrlList, brokerNodeLabel } from "./amqp/broker-connection.js";
export { assignPartitions } from "./amqp/partition-assignment.js";
export { ConfirmedPublisher } from "./amqp/confirmed-publisher.js";
export { describeAmqpConnectError } from "./amqp/describe-connect-error.js";
export { faultInjection, parseFaultSpec, type FaultSpec, type FaultAction, FAULT_CRASH_EXIT_CODE } from "./fault/fault-injection.js";
export {
  quorumQueueArguments, retryQueueName, retryQueueArguments, type TopologySpec,
  partitionQueueName, partitionQueueArguments, preparePartitionExchange, bindPartitionQueues, CONSISTENT_HASH_PLUGIN,
} from "./amqp/topology.js";
export { RETRY_ATTEMPT_HEADER } from "./amqp/retry-attempt.js";
export {
  Outbox, type OutboxTransactionOptions, OutboxRelay, type OutboxRelayOptions, type RelayFaultPoint, type RelayHook, type RelayRound,
  type OutboxClaim, type OutboxRelayStore, type OutboxRow, type OutboxSettlement, type OutboxSubscription, OutboxSignal,
  outboxMessageId, type OutboxJsonValue, type OutboxPublish, type OutboxPublishOptions, type OutboxBackpressureOptions, outboxBackpressure,
  type PublishLimits, defaultPublishLimits,
} from "./outbox/index.js";
export type { Backpressure, BackpressureReading } from "./core/backpressure.js";
export type { BackpressureState } from "./amqp/backpressure-gate.js";
export * from "./retention/index.js";
export * from "./quarantine/index.js";
export { type FailingOutboxRow, type OutboxBacklog } from "./core/store-contract/outbox-admin.js";
export { type InboxOperations, type OperationsCapable, hasOperations } from "./core/store-contract/capabilities.js";
export { type CompleteStore, hasOutboxRelay, isCompleteStore } from "./core/store-contract/capabilities.js";
export { type DatabaseKind, type DatabaseTarget, databaseTargetOf } from "./store/database-url.js";
export { type TargetSessionAttrs, type ServerList, type ServerNode, serverListOf } from "./store/host-list.js";
export { type OpenStoreOptions, type UrlStore, type UrlStoreHandle, openStore } from "./store/open-store.js";
export { type ConsoleHandler, type ConsoleOptions, createConsoleHandler } from "./console/index.js";
