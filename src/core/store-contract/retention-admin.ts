/**
 * What cleanup needs from a database: the purge horizon, the quarantine hold and batched
 * deletes. PostgreSQL, MySQL and SQLite implement it in their `operations()`; a store that does
 * not cannot be cleaned up by this library (and has no stale fence either).
 */
export interface RetentionAdmin {
  /** The database's clock: cutoffs are computed on the same clock that wrote `first_seen`. */
  now(): Promise<Date>;
  /** Every handler's purge horizon (the newest `first_seen` purged so far). */
  purgeHorizons(): Promise<PurgeHorizon[]>;
  /** Dedup rows per handler, with the oldest and newest `first_seen`. */
  dedupSummary(): Promise<DedupSummary[]>;
  /**
   * The earliest time a held quarantine entry still needs: its event time, its first
   * quarantine, or the first_seen of the dedup record its key has (a conflict's stored version),
   * whichever is earliest. Null when nothing is held.
   */
  quarantineHold(handler?: string): Promise<QuarantineHold | null>;
  /** Rows that a purge with this cutoff would delete (`first_seen < cutoff`). */
  countPurgeable(cutoff: Date, handler?: string): Promise<PurgeableRecords>;
  /**
   * Deletes up to `limit` rows with `first_seen < cutoff`, oldest first, and advances each
   * affected handler's horizon to the newest `first_seen` it deleted: both in ONE short
   * transaction, so no claim can ever see the rows gone and the horizon not yet moved.
   */
  purgeBatch(cutoff: Date, limit: number, handler?: string): Promise<PurgeBatchResult>;
  /**
   * Deletes the redelivery counts (poison detection) last touched before `cutoff`: their events
   * were settled or quarantined long ago. Returns how many rows went.
   */
  purgeRedeliveryCounts(cutoff: Date, handler?: string): Promise<number>;
}

export interface PurgeHorizon {
  handler: string;
  /** Dedup records first seen at or before this time may have been purged. */
  purgedThrough: Date;
  rowsPurged: number;
  updatedAt: Date;
}

export interface DedupSummary {
  handler: string;
  records: number;
  oldest: Date | null;
  newest: Date | null;
}

export interface QuarantineHold {
  /** Cleanup does not purge records first seen at or after this time. */
  holdFrom: Date;
  quarantineId: number;
  handler: string;
  tenant: string | null;
  eventId: string | null;
  reason: string;
}

export interface PurgeableRecords {
  records: number;
  oldest: Date | null;
  newest: Date | null;
}

export interface PurgeBatchResult {
  deleted: number;
  /** Per handler touched by the batch: rows deleted and the horizon after the batch. */
  handlers: Array<{ handler: string; deleted: number; purgedThrough: Date }>;
}

/** @deprecated The former name of `RetentionAdmin`. */
export type RetentionStore = RetentionAdmin;
