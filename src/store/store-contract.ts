/**
 * The store contract in one place. A store is the database behind the inbox; what it must and
 * may offer, each part defined where the code that calls it lives:
 *
 * - `Store` (required, src/core/store.ts): the consumer's hot path. `transaction(work)` with a
 *   `StoreTransaction` that claims keys, quarantines, and optionally writes outbox rows
 *   (`writeOutbox`) and counts redeliveries (`countRedelivery`); `migrate`, `listQuarantine`,
 *   `countInbox`, optionally `resendOutbox`, `close`.
 * - `OutboxRelayStore` (optional, src/outbox/outbox-store.ts): the relay's side of the outbox:
 *   claim unsent rows, settle them, clean up, and optionally listen for new rows.
 * - `InboxOperations` through `operations()` (optional, src/store/operations.ts): the operator's
 *   side: retention (`RetentionStore`), quarantine decisions (`QuarantineAdmin`), the schema
 *   version and the outbox backlog.
 *
 * PostgresStore, MysqlStore and SqliteStore offer all three (`CompleteStore`); the stores over
 * a data layer offer `Store` only, and the relay and the operator's command run on the matching
 * complete store over the same tables.
 */
import type { Store } from "../core/store.js";
import type { OutboxRelayStore } from "../outbox/outbox-store.js";
import { type OperationsCapable, hasOperations } from "./operations.js";

export type { Store, StoreTransaction } from "../core/store.js";
export type { OutboxRelayStore } from "../outbox/outbox-store.js";
export type { InboxOperations, OperationsCapable } from "./operations.js";
export { hasOperations };

/** A store with every optional part: the consumer's, the relay's and the operator's. */
export type CompleteStore<Tx = unknown> = Store<Tx> & OutboxRelayStore & OperationsCapable;

/** True when the store can feed an outbox relay. */
export function hasOutboxRelay<Tx>(store: Store<Tx>): store is Store<Tx> & OutboxRelayStore {
  const candidate = store as Partial<OutboxRelayStore>;
  return typeof candidate.claimOutbox === "function" && typeof candidate.cleanupOutbox === "function" && candidate.outboxSignal !== undefined;
}

/** True when the store offers every optional part. */
export function isCompleteStore<Tx>(store: Store<Tx>): store is CompleteStore<Tx> {
  return hasOutboxRelay(store) && hasOperations(store);
}
