/**
 * The one list of the library's error codes. Each error class takes its code and kind from
 * here, and docs/errors.md documents exactly these codes (a test compares the two both ways),
 * so a code cannot be added, renamed or given another kind in one place only.
 */

/** What the pipeline (or an operator command) does with an error; see docs/errors.md. */
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
  /**
   * The database or broker is gone, or refuses all work (a read-only node, a full disk, a node
   * still starting): back off, do not ack, let the broker redeliver, however long it lasts.
   */
  | "connection"
  /** The COMMIT was sent but its result is unknown: never ack; the redelivery and the dedup key decide. */
  | "commit-unknown"
  /**
   * Configuration or programming error: fail loudly, at start or when the pipeline meets it;
   * never retried, delayed or quarantined (the event is not at fault).
   */
  | "config";

export interface CatalogueEntry {
  readonly kind: ErrorKind;
  /** One line: what went wrong. docs/errors.md says more, and what happens to the delivery. */
  readonly meaning: string;
}

export const errorCatalogue = {
  RI_INVALID_EVENT: { kind: "permanent", meaning: "the body could not be decoded or failed validation" },
  RI_PERMANENT_EVENT: { kind: "permanent", meaning: "the event can never apply; its reason says why" },
  RI_INVALID_PUBLISH: { kind: "permanent", meaning: "a message given to publish cannot be carried by AMQP or breaks a limit" },
  RI_RETRY_LATER: { kind: "retry-later", meaning: "the event cannot apply yet: something it depends on has not arrived" },
  RI_STORE_TRANSIENT: { kind: "transient", meaning: "database contention: deadlock, serialization failure, lock timeout, busy" },
  RI_STORE_CONNECTION_LOST: { kind: "connection", meaning: "the database session is gone or cannot be opened" },
  RI_STORE_UNAVAILABLE: { kind: "connection", meaning: "the database answers but refuses every write: read-only, disk full, out of memory, not ready" },
  RI_COMMIT_OUTCOME_UNKNOWN: { kind: "commit-unknown", meaning: "the session died while COMMIT was in flight" },
  RI_QUARANTINE_PUBLISH: { kind: "connection", meaning: "a quarantine or delayed-retry publish was not confirmed" },
  RI_BROKER_UNREACHABLE: { kind: "connection", meaning: "no node of the broker accepted a connection" },
  RI_CONFIG: { kind: "config", meaning: "bad options or a programming error in how the library is used" },
  RI_RETENTION_GUARD: { kind: "config", meaning: "cleanup refused: no replay window, or one under the minimum" },
  RI_QUARANTINE_OPERATION: { kind: "config", meaning: "an operator action on a quarantine entry cannot be done as asked" },
  RI_QUARANTINE_DECIDED: { kind: "config", meaning: "another decision on the quarantine entry is under way or done" },
  RI_QUARANTINE_NOT_FOUND: { kind: "config", meaning: "no quarantine entry has the id an operator action names" },
  RI_QUARANTINE_OPTIONS: { kind: "config", meaning: "the options of an operator action do not go together" },
  RI_CONSOLE_INVALID_REQUEST: { kind: "config", meaning: "a console request's parameter or body field cannot be read as asked" },
  RI_CONSOLE_UNAUTHENTICATED: { kind: "config", meaning: "a console request with neither the token nor a session" },
  RI_CONSOLE_FORBIDDEN: { kind: "config", meaning: "a console request refused for its host name, origin or CSRF token" },
  RI_CONSOLE_NOT_FOUND: { kind: "config", meaning: "no console route, or no bulk job, at that path" },
  RI_CONSOLE_METHOD_NOT_ALLOWED: { kind: "config", meaning: "a console route asked with a method it does not take" },
  RI_CONSOLE_SELECTION_CHANGED: { kind: "config", meaning: "a bulk action's selection no longer holds the count its dry run showed" },
  RI_CONSOLE_BODY_TOO_LARGE: { kind: "config", meaning: "a console request's body is over the size the console reads" },
  RI_CONSOLE_UNSUPPORTED_MEDIA_TYPE: { kind: "config", meaning: "a console request's body is neither JSON nor a form" },
  RI_CONSOLE_THROTTLED: { kind: "config", meaning: "too many failed console authentications from one client" },
  RI_CONSOLE_NO_BROKER: { kind: "config", meaning: "a console replay with no broker configured to publish to" },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof errorCatalogue;

/** A catalogued code with its kind, as an error class's constructor passes them on. */
export function catalogued<C extends ErrorCode>(code: C): [code: C, kind: (typeof errorCatalogue)[C]["kind"]] {
  return [code, errorCatalogue[code].kind];
}
