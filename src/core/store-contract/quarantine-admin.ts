import type { EventKey } from "../event.js";
import type { QuarantineEntry } from "./store.js";

/** Where a quarantine entry stands. Only `held` entries block cleanup. */
export type QuarantineStatus = "held" | "replayed" | "discarded";

/** A quarantine entry with everything an operator needs to decide about it. */
export interface QuarantineDetail extends QuarantineEntry {
  status: QuarantineStatus;
  /** The AMQP properties and headers as the consumer recorded them (JSON text). */
  properties: string;
  /** The work queue it came from, where a replay goes. */
  queue: string;
  eventTime: Date | null;
}

export interface QuarantineFilter {
  /** Default `held`; `all` lists every status. */
  status?: QuarantineStatus | "all";
  handler?: string;
  reason?: string;
  tenant?: string;
  /** Entries first quarantined at or after this time. */
  since?: Date;
  /** Entries first quarantined before this time. */
  until?: Date;
  /** The quarantined version's fingerprint, exactly. */
  fingerprint?: string;
  /** A group's key (see `quarantineGroups`): entries of that handler, reason and normalised cause. */
  group?: string;
  /** A substring of the error text (`detail`), compared case-insensitively (ASCII letters). */
  text?: string;
  /** Keyset paging: only entries with an id above this one. */
  afterId?: number;
  /**
   * Entries whose latest decision is a replay that was committed but neither confirmed nor failed:
   * a replay interrupted between its commit and the broker's confirm. Implies status `replayed`.
   */
  pendingReplay?: boolean;
  /** Default 100. */
  limit?: number;
}

/** Entries that share a handler, reason, status and error text (the first 1,000 characters of it). */
export interface QuarantineCauseCount {
  handler: string;
  reason: string;
  status: QuarantineStatus;
  /** The first 1,000 characters of the entries' error text. */
  detail: string;
  entries: number;
  firstSeen: Date;
  lastSeen: Date;
}

/** The dedup record of a key: what the inbox remembers of the version it applied. */
export interface StoredVersion {
  fingerprint: string;
  firstSeen: Date;
}

export type QuarantineAction = "replay" | "discard";

/** One operator decision, kept for good. */
export interface AuditRecord {
  id: number;
  quarantineId: number;
  action: QuarantineAction;
  actor: string;
  reason: string;
  /** `accept-new`, `accept-stale`, `again`, comma separated; empty for a plain replay or a discard. */
  options: string;
  at: Date;
  /** Replay: when the broker confirmed the republished message. */
  publishedAt: Date | null;
  /** Replay: why the republish failed (the entry went back to `held`). */
  failure: string | null;
}

/** A page of the audit log, newest first (keyset paging: pass the last id seen as `beforeId`). */
export interface AuditLogPage {
  limit?: number;
  beforeId?: number;
}

export interface ResolutionRequest {
  action: QuarantineAction;
  actor: string;
  reason: string;
  /**
   * Replay of a conflict: let the quarantined version replace the stored one. The consumer that
   * gets the replayed message finds a one-time grant for exactly (stored fingerprint -> this
   * fingerprint), swaps the fingerprint and applies the event, in one transaction.
   */
  acceptNew?: boolean;
  /** Replay of a stale event: a one-time grant lets exactly this version past the stale fence. */
  acceptStale?: boolean;
  /**
   * Replay an entry already replayed and confirmed whose version the inbox has not applied (its
   * message was lost: a purged queue, say). Without it such a replay is refused: the first copy
   * is most likely still waiting for its consumer. Recorded as the audit option `again`.
   */
  again?: boolean;
  /**
   * Refuse unless the entry is still `held` when the decision is taken (bulk operations): an
   * entry another operator or an earlier run already decided on is left alone.
   */
  onlyIfHeld?: boolean;
}

export interface QuarantineCount {
  handler: string;
  reason: string;
  status: QuarantineStatus;
  entries: number;
  oldest: Date;
}

/**
 * Operator access to the quarantine: what the `rabbit-inbox quarantine` commands (and an ops UI)
 * need. Every decision is recorded with who, when and why.
 */
export interface QuarantineAdmin {
  listQuarantineEntries(filter?: QuarantineFilter): Promise<QuarantineDetail[]>;
  getQuarantineEntry(id: number): Promise<QuarantineDetail | null>;
  quarantineCounts(): Promise<QuarantineCount[]>;
  /**
   * Entries matching the filter (its `group`, `afterId`, `pendingReplay` and `limit` aside)
   * counted per handler, reason, status and error text: what `quarantineGroups` merges by cause.
   */
  quarantineCauses(filter?: QuarantineFilter): Promise<QuarantineCauseCount[]>;
  /** The dedup record of a key, if it is still kept. */
  storedVersion(handler: string, key: EventKey): Promise<StoredVersion | null>;
  /** Another quarantine entry of the same key carrying `fingerprint`: the body of a version the inbox saw. */
  findQuarantinedVersion(handler: string, key: EventKey, fingerprint: string): Promise<QuarantineDetail | null>;
  quarantineAudit(quarantineId: number): Promise<AuditRecord[]>;
  /** Every entry's decisions, newest first: at most `limit` (default 100), ids below `beforeId` for the next page. */
  auditLog(page?: AuditLogPage): Promise<AuditRecord[]>;
  /** The clock the audit times are written on (the database's; this host's for SQLite). */
  now(): Promise<Date>;
  /**
   * In one transaction, under the entry's row lock (SQLite: the write lock): checks the entry can
   * take the action (throws QuarantineOperationError otherwise, QuarantineDecisionTakenError when
   * another decision is under way or done: one decision at a time per entry, whoever asks),
   * records the audit row, writes any grant, and sets the status (`replayed` or `discarded`). A
   * replay is committed BEFORE the message is republished, so the consumer that receives it
   * always finds its grant.
   */
  beginResolution(id: number, request: ResolutionRequest): Promise<AuditRecord>;
  /** The republish was confirmed. */
  confirmReplay(auditId: number): Promise<void>;
  /** The republish failed: revokes unused grants and puts the entry back to `held` (unless it moved on). */
  failReplay(auditId: number, failure: string): Promise<void>;
}
