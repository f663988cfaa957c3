import type { EventKey } from "../event.js";

/** One inbox row to insert: the dedup record (scope and payload fingerprint). */
export interface InboxClaim {
  key: EventKey;
  fingerprint: string;
  /**
   * The event's own time (AMQP `timestamp`, or a configured body field), for the stale fence
   *: a key the store does not find, whose event time is at or before the handler's purge
   * horizon, is refused as `stale`, since its dedup record may have been purged. Undefined: the
   * event is taken as first seen now, and is never stale.
   */
  eventTime?: Date | undefined;
}

/** Result of claiming one key inside a transaction. */
export type ClaimResult =
  | {
      status: "claimed";
      /**
       * Set when an operator's accept-new grant let this version replace the applied one: the
       * fingerprint it replaced. This version's outbox message ids and idempotency keys then
       * include its own fingerprint, so they differ from those of the version it replaced.
       */
      replaced?: string;
    }
  /** A row already existed (committed by an earlier transaction) with this fingerprint. */
  | { status: "exists"; fingerprint: string }
  /**
   * No row, and the claim's event time is at or before the purge horizon: the event can no longer
   * be told apart from one whose record was purged. Nothing was inserted. Quarantine it as `stale`.
   */
  | { status: "stale"; horizon: Date };

/** A quarantine row, written in the same transaction as the decision to quarantine. */
export interface QuarantineRecord {
  handler: string;
  /** Null when the message could not be identified (malformed body). */
  key: EventKey | null;
  reason: string;
  detail: string;
  /** Fingerprint of the incoming payload, when it could be decoded. */
  fingerprint: string | null;
  /** For a conflict: the fingerprint stored with the first version. */
  storedFingerprint: string | null;
  /** SHA-256 of the raw body: the dedup key of a quarantine entry that has no event key. */
  bodySha256: string;
  /** The raw body, cut at the configured cap. */
  body: Buffer;
  bodyTruncated: boolean;
  /** AMQP properties and headers, as JSON text, for the operator. */
  properties: string;
  queue: string;
  /** The event's own time, when known: cleanup keeps the records an entry's replay needs. */
  eventTime?: Date | null;
}

/** A quarantine entry as `listQuarantine` returns it (the operator's side adds status and origin). */
export interface QuarantineEntry {
  id: number;
  handler: string;
  tenant: string | null;
  eventId: string | null;
  reason: string;
  detail: string;
  fingerprint: string | null;
  /** A conflict: the fingerprint of the version the inbox applied first. */
  storedFingerprint: string | null;
  occurrences: number;
  /** The raw body (cut at the consumer's cap when `bodyTruncated`). */
  body: Buffer;
  bodyTruncated: boolean;
  firstSeen: Date;
  lastSeen: Date;
}

/** The event whose handling produced an outbox message. */
export interface OutboxSource {
  tenant: string;
  handler: string;
  eventId: string;
  /**
   * The event's fingerprint, set only when this version replaced an applied one (accept-new):
   * part of its outbox message ids, so they are not the replaced version's ids.
   */
  version?: string;
}

/**
 * One outgoing message, written to the outbox in the same transaction as the inbox record and
 * the business update that caused it, and published later by the relay.
 */
export interface OutboxRecord {
  /** The AMQP `messageId`; unique in the outbox, the same on every re-send. */
  messageId: string;
  exchange: string;
  routingKey: string;
  body: Buffer;
  /** AMQP properties other than `messageId` and `persistent`, as JSON text (an object). */
  properties: string;
  /** Messages with the same key are published one at a time, in outbox order. Null: no order. */
  orderingKey: string | null;
  /** Null for a message written outside a handler (standalone use). */
  source: OutboxSource | null;
}

/**
 * The work a store does inside one open transaction. `handle` is the driver object the user's
 * handler receives (a pg PoolClient, a better-sqlite3 Database, ...) so business writes join
 * the same transaction as the inbox record.
 */
export interface StoreTransaction<Tx> {
  readonly handle: Tx;
  /**
   * Inserts one inbox row per claim, all for one handler, in the given order. The unique key
   * `(tenant, handler, event_id)` decides under concurrency: never select-then-insert.
   * A key held by a concurrent uncommitted transaction waits for it. Keys must be distinct.
   */
  claim(handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]>;
  /** Records (or counts again) quarantine entries; idempotent per (handler, key, fingerprint) or body hash. */
  quarantine(records: readonly QuarantineRecord[]): Promise<void>;
  /**
   * Writes outbox rows, in the given order, in this transaction. A message id already in
   * the outbox is skipped, not an error. Optional so that a store without an outbox table
   * still satisfies the contract: a handler's `ctx.publish` then fails with InboxConfigError.
   */
  writeOutbox?(records: readonly OutboxRecord[]): Promise<void>;
  /**
   * Counts one more redelivery of this event for `handler` and returns how many this store has
   * counted (1 the first time). The pipeline calls it in a transaction of its own, committed
   * before the event's transaction starts, so the count survives a process that crashes while
   * handling the event: classic queues carry no delivery count, and this is how a message that
   * kills its consumer every time is found (poison). Optional: without it, only a quorum
   * queue's `x-delivery-count` detects poison.
   */
  countRedelivery?(handler: string, key: EventKey): Promise<number>;
}

/**
 * A database behind the inbox. Implementations classify their driver's errors into
 * TransientStoreError (contention or connection), CommitOutcomeUnknownError, or rethrow.
 */
export interface Store<Tx = unknown> {
  /** `postgres`, `sqlite`, `mysql`... for logs. */
  readonly dialect: string;
  /** How many transactions may usefully run at once (1 for a single-writer database). */
  readonly maxConcurrentTransactions: number;
  /** Creates or upgrades the inbox tables. Idempotent; safe to run from several processes. */
  migrate(): Promise<void>;
  /**
   * Runs `work` in one transaction: BEGIN, work, COMMIT. Any throw rolls back and rethrows:
   * the driver's errors classified, any other error (a handler's, the pipeline's own request
   * for a rollback) as it was thrown, the same object. `beforeCommit` runs after `work` and
   * before COMMIT (fault injection).
   */
  transaction<T>(work: (tx: StoreTransaction<Tx>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T>;
  /** Lists quarantine entries, newest first. */
  listQuarantine(options?: { handler?: string; limit?: number }): Promise<QuarantineEntry[]>;
  /** Counts inbox rows for a handler, optionally for one key: for tests and `status`. */
  countInbox(handler: string, key?: EventKey): Promise<number>;
  /**
   * For duplicates: makes the unsent outbox rows produced by these events of `handler`
   * due now, wakes the relays, and returns how many rows that was. Rows a relay is sending
   * right now are left alone. Runs in its own short transaction. Optional (no outbox: no-op).
   */
  resendOutbox?(handler: string, keys: readonly EventKey[]): Promise<number>;
  /**
   * The database as the store's last transaction found it, for a health check: whether it
   * worked, on which node, and while it does not, what refused or failed. Cheap and synchronous.
   * Optional.
   */
  databaseHealth?(): DatabaseHealth;
  close(): Promise<void>;
}

/** What a store last learned of its database (see Store.databaseHealth). */
export interface DatabaseHealth {
  /** False from a transaction that met an outage (a refusal, a lost connection) until one commits. */
  available: boolean;
  /** `host:port` of the node the last transaction ran on or was refused by; null before any, and for a file. */
  node: string | null;
  /** Since when the outage lasts, its code (`RI_STORE_UNAVAILABLE`, `RI_STORE_CONNECTION_LOST`), the refusal's reason and the message; null while available. */
  problem: { since: Date; code: string; reason: string | null; message: string } | null;
}

/**
 * The identity of a quarantine entry: the event key and payload fingerprint when known, else
 * the raw body's hash. A message that comes back (crash before its ack, a producer sending it
 * twice) counts another occurrence instead of adding a second entry.
 */
export function quarantineDedupKey(record: QuarantineRecord): string {
  if (record.key && record.fingerprint) {
    return `event:${JSON.stringify([record.key.tenant, record.key.eventId, record.fingerprint])}`;
  }
  return `body:${record.bodySha256}`;
}
