/**
 * The store contract, all in this folder. A store is the database behind the inbox; what it must
 * and may offer:
 *
 * - `Store` (required, store.ts): the consumer's hot path. `transaction(work)` with a
 *   `StoreTransaction` that claims keys, quarantines, and optionally writes outbox rows
 *   (`writeOutbox`) and counts redeliveries (`countRedelivery`); `migrate`, `listQuarantine`,
 *   `countInbox`, optionally `resendOutbox`, `close`.
 * - `OutboxRelayStore` (optional, outbox-relay-store.ts): the relay's side of the outbox: claim
 *   unsent rows, settle them, clean up, and optionally listen for new rows. `OutboxSignal`
 *   (outbox-signal.ts) is where a store and the relays of its process meet.
 * - The operator's side through `operations()` (optional): `QuarantineAdmin` (the quarantine's
 *   decisions), `RetentionAdmin` (cleanup), `OutboxAdmin` (the backlog), and the schema version.
 *   Each caller asks for the part it uses.
 *
 * PostgresStore, MysqlStore and SqliteStore offer all three (`CompleteStore`); the stores over
 * a data layer offer `Store` only, and the relay and the operator's command run on the matching
 * complete store over the same tables.
 */
import type { OutboxAdmin } from "./outbox-admin.js";
import type { OutboxRelayStore } from "./outbox-relay-store.js";
import type { QuarantineAdmin } from "./quarantine-admin.js";
import type { RetentionAdmin } from "./retention-admin.js";
import type { Store } from "./store.js";

/**
 * A numbered schema migration, applied once and recorded in `rabbit_inbox_migrations`.
 * `{schema}` in the SQL is replaced by the qualified table prefix (empty, or `"name".`).
 * Never edit a shipped migration: add the next number.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/**
 * What `operations()` returns: every part of the operator's side, and the schema version.
 * Separate from the Store contract, which is the consumers' hot path: a store that has no
 * operations yet still consumes correctly.
 */
export interface InboxOperations extends QuarantineAdmin, RetentionAdmin, OutboxAdmin {
  readonly dialect: string;
  /** The migrations this build of the library knows for the dialect. */
  readonly migrations: readonly Migration[];
  /** Versions recorded in `rabbit_inbox_migrations`; empty when the table does not exist yet. */
  appliedMigrations(): Promise<number[]>;
}

/** A store that offers operations, e.g. PostgresStore and SqliteStore. */
export interface OperationsCapable {
  operations(): InboxOperations;
}

export function hasOperations(store: object): store is OperationsCapable {
  return typeof (store as Partial<OperationsCapable>).operations === "function";
}

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
