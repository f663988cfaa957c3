import type { OutboxSignal } from "./outbox-signal.js";

/** A pending outbox row, as a relay publishes it. */
export interface OutboxRow {
  id: number;
  messageId: string;
  exchange: string;
  routingKey: string;
  body: Buffer;
  /** AMQP properties written with the row (contentType, headers, timestamp...). */
  properties: Record<string, unknown>;
  orderingKey: string | null;
  /** Publish attempts before this one. */
  attempts: number;
}

/** What a relay did with the rows of one claim. Rows in neither list stay pending, untouched. */
export interface OutboxSettlement {
  /** Confirmed by the broker (and routed): mark sent, or delete with `deleteSent`. */
  sent: readonly number[];
  /**
   * Refused, unroutable, timed out or lost with the channel: count the attempt, retry in
   * `retryDelayMs` (a delay rather than a time, so the database's clock decides).
   */
  failed: ReadonlyArray<{ id: number; error: string; retryDelayMs: number }>;
  /**
   * Delete the sent rows instead of marking them: the relay keeps no sent rows
   * (`sentRetentionMs: 0`). One statement that adds no row version and no index entry, where a
   * mark writes a new version of every row and deletes it again at cleanup.
   */
  deleteSent?: boolean;
}

/** What a relay did with rows handed to it from memory: those in `due` go back to the claims, due now. */
export interface HandedOffSettlement extends OutboxSettlement {
  /** Not published, or published behind a failed row of their key: due now, no attempt counted. */
  due: readonly number[];
  /**
   * Packed rows (see `HandedOffRow.packedIn`) settled whole: each is deleted, and those of its
   * messages not in `sent` become rows of their own, the failed ones with their attempt counted,
   * the rest due now. The ids above then also name the packed messages.
   */
  packed?: readonly number[];
}

/**
 * Rows a relay holds for publishing. On PostgreSQL the claim is an open transaction holding
 * `FOR UPDATE SKIP LOCKED` row locks: another relay cannot take them while this one lives, and
 * a relay that dies rolls back, so its rows are published again. On SQLite it is a lease.
 */
export interface OutboxClaim {
  /** In outbox (id) order. Rows sharing an ordering key are a gap-free head of that key's queue. */
  readonly rows: readonly OutboxRow[];
  /**
   * Epoch ms after which this claim may belong to another relay (a lease); Infinity when the
   * database holds it for the claim's lifetime. A relay starts no publish it cannot finish by then.
   */
  readonly expiresAt: number;
  /** Records the outcome and ends the claim. Call exactly once, even when nothing was published. */
  settle(settlement: OutboxSettlement): Promise<void>;
  /** True for rows handed over in memory: no database transaction is held while they are out. */
  readonly handedOff?: boolean;
}

export interface ClaimOptions {
  limit: number;
  relayId: string;
  leaseMs: number;
  /**
   * Ordering keys of which this relay still holds an earlier claim that is being published, and
   * the last row id it holds of each. Such a key's rows up to that id are the unbroken head of
   * the key, held by this relay: the claim continues the key right after them instead of
   * treating them as rows that block it.
   */
  holding?: ReadonlyMap<string, number>;
}

/** A live LISTEN (or equivalent) subscription. */
export interface OutboxSubscription {
  close(): Promise<void>;
}

/** The database side of the relay. PostgresStore and SqliteStore implement it. */
export interface OutboxRelayStore {
  readonly dialect: string;
  /** Fired in-process after a commit that wrote outbox rows. */
  readonly outboxSignal: OutboxSignal;
  /**
   * Claims up to `limit` due, unsent rows that no other relay holds. Rows of an ordering key
   * are returned only as the unbroken head of that key's unsent rows (after the rows of
   * `holding`). `relayId` and `leaseMs` matter where the claim is a lease.
   */
  claimOutbox(options: ClaimOptions): Promise<OutboxClaim | null>;
  /**
   * Whether a relay may take a claim (with `holding`) while its previous claim is still open,
   * and mark the previous one meanwhile. Without it, a relay claims only after it settled.
   */
  readonly overlappingClaims?: boolean;
  /**
   * Settles rows that were handed to this process's relay after their commit (leased, see
   * `OutboxSignal.attach`) and published from memory: marks the confirmed rows sent, counts the
   * failed rows' attempt, and makes `due` rows due now, each without waiting for a row another
   * relay holds (that relay settles it). A store with it lets its relay attach as the handoff.
   */
  settleHandedOff?(settlement: HandedOffSettlement): Promise<void>;
  /** Deletes up to `limit` rows sent before `sentBefore`; returns how many. */
  cleanupOutbox(sentBefore: Date, limit: number): Promise<number>;
  /**
   * Unsent rows, counted up to `atMost` and no further: as cheap with a million waiting as with
   * a thousand, so a consumer can ask it every second (`outboxBackpressure`). Rows waiting for a
   * retry and rows being published count too.
   */
  countPendingOutbox?(atMost: number): Promise<number>;
  /**
   * Cross-process wake-up (PostgreSQL LISTEN). `onWake` runs when another session committed
   * outbox rows; `onLost` when the subscription broke (the relay polls meanwhile, and listens again).
   */
  listenOutbox?(onWake: () => void, onLost: (error: Error) => void): Promise<OutboxSubscription>;
}
