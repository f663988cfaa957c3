/** The operator's view of the outbox: what waits in it, and what fails to go out. */
export interface OutboxAdmin {
  /** The outbox's unsent rows, for an operator: how many, how old, how many fail to publish. */
  outboxBacklog(): Promise<OutboxBacklog>;
  /** Unsent rows whose publish failed, most attempts first: what an operator looks at when `failing` is not 0. */
  failingOutboxRows(limit: number): Promise<FailingOutboxRow[]>;
}

export interface FailingOutboxRow {
  id: number;
  exchange: string;
  routingKey: string;
  attempts: number;
  lastError: string;
  createdAt: Date;
  /** When the relay tries it again. */
  availableAt: Date;
}

/** What waits in the outbox. Counting reads every unsent row: an operator's query, not the relay's. */
export interface OutboxBacklog {
  /** Rows not sent yet (due, waiting for a retry, or being published right now). */
  pending: number;
  /** When the oldest unsent row was written; null when nothing is pending. */
  oldestPendingAt: Date | null;
  /** The database's clock, to age `oldestPendingAt` against. */
  now: Date;
  /** Unsent rows whose publish failed at least once (they wait for a retry). */
  failing: number;
  /** Of those, rows the broker returned as unroutable: nothing is bound where they go. */
  unroutable: number;
  /** The failing row with the most attempts, as an example; null when nothing failed. */
  worst: { exchange: string; routingKey: string; attempts: number; lastError: string } | null;
}

/** The text of the relay's error for a publish the broker returned: no queue was bound. */
export const UNROUTABLE_MARK = "unroutable";
