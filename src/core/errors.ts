import { type ErrorKind, catalogued } from "./error-catalogue.js";

export type { ErrorKind } from "./error-catalogue.js";

/**
 * Every error the library raises carries a stable `code` (never reused; the library's own codes
 * and their kinds are listed once, in error-catalogue.ts, and documented in docs/errors.md) and
 * a `kind` that decides what the pipeline does with the delivery. A user's own subclass may
 * bring a code of its own.
 */
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
    super(...catalogued("RI_PERMANENT_EVENT"), message, options);
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
    super(...catalogued("RI_RETRY_LATER"), message, options);
    this.reason = reason;
  }
}

/** The message could not be decoded or failed validation. Quarantined with reason `invalid`. */
export class InvalidEventError extends PermanentEventError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("invalid", message, options);
    Object.defineProperty(this, "code", { value: catalogued("RI_INVALID_EVENT")[0] });
  }
}

/**
 * A message given to `publish` (a handler's `ctx.publish`, or the standalone outbox) that AMQP
 * could not carry or that breaks a limit: a routing key over 255 bytes, a header amqplib cannot
 * encode, a body over the cap... `field` names what is wrong (`routingKey`, `headers.trace`,
 * `body`). Thrown at the call, so the relay is never handed a row the broker would refuse. In a
 * handler it is that event's permanent failure: quarantined as `invalid_publish`.
 */
export class InvalidPublishError extends PermanentEventError {
  readonly field: string;
  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super("invalid_publish", message, options);
    Object.defineProperty(this, "code", { value: catalogued("RI_INVALID_PUBLISH")[0] });
    this.field = field;
  }
}

/** A transient database failure classified by a store (retry the whole transaction). */
export class TransientStoreError extends InboxError {
  constructor(message: string, options?: { cause?: unknown; kind?: "transient" | "connection" }) {
    super(...catalogued(options?.kind === "connection" ? "RI_STORE_CONNECTION_LOST" : "RI_STORE_TRANSIENT"), message, options);
  }
}

/**
 * Why a database refuses work: no event is at fault, and every event would meet the same refusal
 * until an operator, a failover or time fixes the database.
 */
export type StoreRefusal = "read-only" | "disk-full" | "out-of-memory" | "not-ready" | "not-primary-component";

/**
 * The database answered, and refused: a read-only node (a standby, an old primary that came back
 * demoted, a stale virtual IP), a full disk, no memory, a server starting up or shutting down, a
 * Galera node outside the primary component. An outage, handled like a lost connection: the
 * session is discarded (a multi-host pool then looks for the writable node), the transaction is
 * retried in process, then the deliveries go back to the broker in order; never delayed or
 * quarantined for it. `node` is the `host:port` that refused, when known.
 */
export class StoreUnavailableError extends InboxError {
  readonly reason: StoreRefusal;
  readonly node: string | null;
  constructor(reason: StoreRefusal, message: string, options?: { cause?: unknown; node?: string | null }) {
    super(...catalogued("RI_STORE_UNAVAILABLE"), message, options);
    this.reason = reason;
    this.node = options?.node ?? null;
  }
}

/** The connection broke while COMMIT was in flight: the transaction may or may not be durable. */
export class CommitOutcomeUnknownError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(...catalogued("RI_COMMIT_OUTCOME_UNKNOWN"), message, options);
  }
}

/** Invalid options passed to the library. */
export class InboxConfigError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(...catalogued("RI_CONFIG"), message, options);
  }
}

/** Publishing to the quarantine queue was not confirmed by the broker in time. */
export class QuarantinePublishError extends InboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(...catalogued("RI_QUARANTINE_PUBLISH"), message, options);
  }
}

/** No node of the RabbitMQ broker accepted a connection; the message names each node's failure. */
export class BrokerUnreachableError extends InboxError {
  /** Why each node failed, in the order they were tried (no credentials). */
  readonly failures: readonly string[];
  constructor(message: string, options?: { cause?: unknown; failures?: readonly string[] }) {
    super(...catalogued("RI_BROKER_UNREACHABLE"), message, options);
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
