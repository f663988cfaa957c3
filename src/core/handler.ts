import type { OutboxPublish } from "./publish-options.js";
import type { EventKey, ParsedEvent } from "./event.js";

/** What the pipeline knows about the delivery an event arrived in. Broker-neutral. */
export interface DeliveryInfo {
  queue: string;
  redelivered: boolean;
  /** `x-delivery-count` on quorum queues, when the broker sets it. */
  deliveryCount: number | undefined;
  messageId: string | undefined;
  /** AMQP `timestamp` property, when the producer set it. */
  timestamp: Date | undefined;
  headers: Readonly<Record<string, unknown>>;
}

/** Handed to a handler for each event it applies. */
export interface HandlerContext<Tx> {
  /** The open database transaction: write business data through it. */
  readonly tx: Tx;
  readonly key: EventKey;
  /** The handler (dedup scope) name. */
  readonly handler: string;
  readonly delivery: DeliveryInfo;
  /**
   * A stable key for an outgoing call made because of this event: the same on every
   * redelivery, different per tenant, handler, event and `name`. Pass it as the
   * Idempotency-Key of a payment API, for example. A version that an operator let replace the
   * applied one (`quarantine replay --accept-new`) gets keys of its own (they include its
   * fingerprint), so the payment API does not answer it with the replaced version's result.
   */
  idempotencyKey(name?: string): string;
  /**
   * Publishes a message through the transactional outbox: the message is written in this
   * transaction, with the inbox record and the business update, and the outbox relay publishes
   * it after COMMIT (persistent, publisher confirms, `mandatory`). A rollback leaves nothing;
   * a duplicate of this event produces nothing again. The message id is derived from
   * (tenant, handler, event id, position of this publish within the event's handling; and the
   * version's fingerprint after an accept-new), so a copy the relay re-sends carries the same
   * id. Await it; resolves to the message id. A message AMQP could not carry or over a limit (a
   * routing key over 255 bytes, a header amqplib cannot encode, a body over
   * `publishLimits.maxBodyBytes`...) rejects at once with InvalidPublishError, naming the field:
   * let it propagate, and this event alone is quarantined as `invalid_publish` while the rest of
   * the batch applies. A handler that catches it decides: its event then applies without that message.
   */
  publish: OutboxPublish;
}

/** One event of a batch, as given to `handleBatch`. */
export interface BatchItem<E, Tx> {
  event: E;
  ctx: HandlerContext<Tx>;
}

/** Events a set-based handler refuses, by their index in the batch it was given. */
export interface BatchRejection {
  /** Position in the `items` given to `handleBatch`; one outside them is a programming error (InboxConfigError). */
  index: number;
  /** Quarantine reason, e.g. `account_missing`. */
  reason: string;
  detail: string;
  /**
   * The event cannot apply yet (what it depends on has not arrived) rather than never: like a
   * thrown RetryLaterError, it goes through the broker's delayed-retry queues and is quarantined
   * with `reason` only after the last delay. Default false: quarantined at once.
   */
  retryLater?: boolean;
}

/**
 * A consumer's business logic. `name` is the dedup scope: two handlers consuming the same
 * event each apply it once. Provide `handle` (one event at a time), `handleBatch` (set-based,
 * fastest), or both.
 */
export interface InboxHandler<E, Tx> {
  readonly name: string;
  /**
   * Validates the decoded JSON body and returns the typed event and its identity. Throw
   * InvalidEventError for anything malformed. Default: `tenant` and `event_id` string fields,
   * the body itself as the event.
   */
  parse?(body: Record<string, unknown>, delivery: DeliveryInfo): ParsedEvent<E>;
  /**
   * Applies one event inside the transaction. Throw PermanentEventError to quarantine it, or
   * RetryLaterError when it cannot apply yet (it is tried again after the broker-side delays).
   */
  handle?(event: E, ctx: HandlerContext<Tx>): Promise<void>;
  /**
   * Applies a batch of new (never applied) events inside one transaction, in delivery order.
   * Return rejections for events that can never apply: the transaction is rolled back and run
   * again without them, and they are quarantined with their reason (or, with `retryLater`, sent
   * through the delayed retries first).
   */
  handleBatch?(items: ReadonlyArray<BatchItem<E, Tx>>, tx: Tx): Promise<readonly BatchRejection[] | void>;
  /** Payload fingerprint. Default: SHA-256 of the canonical JSON of `fingerprintSource`. */
  fingerprint?(source: unknown): string;
  /**
   * The quarantine reasons this handler gives (in PermanentEventError, RetryLaterError, a
   * `handleBatch` rejection), e.g. `["account_missing"]`. They become values of the `reason`
   * label of `rabbit_inbox_quarantined_total`, next to the library's own; any other reason is
   * counted there as `other` (its text stays in the quarantine entry), so that text carrying an
   * id cannot grow the metrics without bound. Default: none.
   */
  readonly quarantineReasons?: readonly string[];
}
