/** A value that survives a round trip through JSON: what an outbox header may hold. */
export type OutboxJsonValue = string | number | boolean | null | OutboxJsonValue[] | { [key: string]: OutboxJsonValue };

/**
 * Options of `ctx.publish` and of the standalone `publish`. Every message goes out persistent
 * (delivery mode 2), with `mandatory`, publisher confirms and a `messageId`.
 */
export interface OutboxPublishOptions {
  /** Default: `application/json` when the body is serialized as JSON, none otherwise. */
  contentType?: string;
  contentEncoding?: string;
  /** Stored as JSON, so values must be JSON values (no Buffers, no bigints). */
  headers?: Record<string, OutboxJsonValue>;
  type?: string;
  correlationId?: string;
  replyTo?: string;
  /** Per-message TTL in milliseconds. */
  expiration?: number | string;
  /** 0..255. */
  priority?: number;
  appId?: string;
  /**
   * Messages that share an ordering key (an aggregate id, an account...) reach their queues in
   * the order they were written, and one is marked sent only after every earlier one was: the
   * relay sends a key's next message right behind the previous one on the same channel when both
   * go to the same exchange and routing key, else after the previous one's confirm (always so
   * with the relay's `pipelineKeys: false`). Default: no ordering constraint.
   */
  orderingKey?: string;
  /**
   * Overrides the message id. Inside a handler the default is derived from the event's key and
   * the publish's position (see `outboxMessageId`); in standalone use it is a random UUID unless
   * the transaction names a source. An id already in the outbox is skipped, not an error.
   */
  messageId?: string;
}

/**
 * Records a message in the current transaction's outbox and resolves to its message id. The
 * body is sent as is when it is a Buffer or a string, and as JSON text otherwise.
 */
export type OutboxPublish = (exchange: string, routingKey: string, body: unknown, options?: OutboxPublishOptions) => Promise<string>;
