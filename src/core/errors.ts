/**
 * Every error the library raises carries a stable `code` (never reused, documented in
 * docs/errors.md) and a `kind` that decides what the pipeline does with the delivery.
 */
export type ErrorKind =
  /** The event can never succeed as sent: quarantine it, then ack. */
  | "permanent"
  /**
   * The event cannot apply yet (something it depends on has not arrived): not retried in
   * process; sent through the broker's delayed-retry queues, quarantined after the last delay.
   */
  | "retry-later"
  /** Contention (deadlock, serialization, lock timeout): retry the transaction. */
  | "transient"
  /** The database or broker connection is gone: back off, do not ack, let the broker redeliver. */
  | "connection"
  /** The COMMIT was sent but its result is unknown: never ack; the redelivery and the dedup key decide. */
  | "commit-unknown"
  /** Configuration or programming error: fail loudly at start. */
  | "config";

export class InboxError extends Error {
  readonly code: string;
  readonly kind: ErrorKind;
  constructor(code: string, kind: ErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.kind = kind;
  }
}

/**
 * Thrown by a handler (or a parser) when the event can never be applied, e.g. the ledger's
 * `account_missing`. `reason` becomes the quarantine reason; the transaction is rolled back.
 */
export class PermanentEventError extends InboxError {
  readonly reason: string;
  constructor(reason: string, message: string, options?: { cause?: unknown }) {
    super("RI_PERMANENT_EVENT", "permanent", message, options);
    this.reason = reason;
  }
}

/**
 * Thrown by a handler when the event cannot apply YET: something it depends on is not there
 * (the ledger's adjustment of an account whose opening has not committed, because another
 * replica or a delayed retry still holds it). The transaction is rolled back for this event only;
 * the event waits in the broker's delayed-retry queues (`<queue>.retry.<n>`) and is tried again
 * after each delay; after the last one it is quarantined with `reason`. A `handleBatch` returns
 * the same refusal as a rejection with `retryLater: true`.
 */
export class RetryLaterError extends InboxError {
  readonly reason: string;
  constructor(reason: string, message: string, options?: { cause?: unknown }) {
    super("RI_RETRY_LATER", "retry-later", message, options);
    this.reason = reason;
  }
}

/** The message could not be decoded or failed validation. Quarantined with reason `invalid`. */
export class InvalidEventError extends PermanentEventError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("invalid", message, options);
    Object.defineProperty(this, "code", { value: "RI_INVALID_EVENT" });
  }
}

/** A transient database failure classified by a store (retry the whole transaction). */
export class TransientStoreError extends InboxError {
  constructor(message: string, options?: { cause?: unknown; kind?: "transient" | "connection" }) {
    const kind = options?.kind ?? "transient";
    super(kind === "connection" ? "RI_STORE_CONNECTION_LOST" : "RI_STORE_TRANSIENT", kind, message, options);
  }
}

/** The connection broke while COMMIT was in flight: the transaction may or may not be durable. */
export class CommitOutcomeUnknownError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("RI_COMMIT_OUTCOME_UNKNOWN", "commit-unknown", message, options);
  }
}

/** Invalid options passed to the library. */
export class InboxConfigError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("RI_CONFIG", "config", message, options);
  }
}

/** Publishing to the quarantine queue was not confirmed by the broker in time. */
export class QuarantinePublishError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("RI_QUARANTINE_PUBLISH", "connection", message, options);
  }
}

/** No node of the RabbitMQ broker accepted a connection; the message names each node's failure. */
export class BrokerUnreachableError extends InboxError {
  /** Why each node failed, in the order they were tried (no credentials). */
  readonly failures: readonly string[];
  constructor(message: string, options?: { cause?: unknown; failures?: readonly string[] }) {
    super("RI_BROKER_UNREACHABLE", "connection", message, options);
    this.failures = options?.failures ?? [];
  }
}

/** Reads the pipeline-relevant kind of any thrown value; unknown errors are treated as transient. */
export function errorKindOf(error: unknown): ErrorKind {
  return error instanceof InboxError ? error.kind : "transient";
}

export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
