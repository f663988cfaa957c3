import type { EventKey } from "./event.js";

/** One inbox row to insert: the dedup record of S2/S3. */
export interface InboxClaim {
  key: EventKey;
  fingerprint: string;
}

/** Result of claiming one key inside a transaction. */
export type ClaimResult =
  | { status: "claimed" }
  /** A row already existed (committed by an earlier transaction) with this fingerprint. */
  | { status: "exists"; fingerprint: string };

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
}

export interface QuarantineEntry {
  id: number;
  handler: string;
  tenant: string | null;
  eventId: string | null;
  reason: string;
  detail: string;
  fingerprint: string | null;
  storedFingerprint: string | null;
  occurrences: number;
  body: Buffer;
  bodyTruncated: boolean;
  firstSeen: Date;
  lastSeen: Date;
}

/**
 * The work a store does inside one open transaction. `handle` is the driver object the user's
 * handler receives (a pg PoolClient, a better-sqlite3 Database, ...) so business writes join
 * the same transaction as the inbox record (S11).
 */
export interface StoreTransaction<Tx> {
  readonly handle: Tx;
  /**
   * Inserts one inbox row per claim, all for one handler, in the given order. The unique key
   * `(tenant, handler, event_id)` decides under concurrency (S12): never select-then-insert.
   * A key held by a concurrent uncommitted transaction waits for it. Keys must be distinct.
   */
  claim(handler: string, claims: readonly InboxClaim[]): Promise<ClaimResult[]>;
  /** Records (or counts again) quarantine entries; idempotent per (handler, key, fingerprint) or body hash. */
  quarantine(records: readonly QuarantineRecord[]): Promise<void>;
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
   * Runs `work` in one transaction: BEGIN, work, COMMIT. Any throw rolls back and rethrows
   * (classified). `beforeCommit` runs after `work` and before COMMIT (fault injection).
   */
  transaction<T>(work: (tx: StoreTransaction<Tx>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T>;
  /** Lists quarantine entries, newest first. */
  listQuarantine(options?: { handler?: string; limit?: number }): Promise<QuarantineEntry[]>;
  /** Counts inbox rows for a handler, optionally for one key: for tests and `status`. */
  countInbox(handler: string, key?: EventKey): Promise<number>;
  close(): Promise<void>;
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
