import { SetMetadata } from "@nestjs/common";
import type { InboxConsumerOptions } from "../amqp/inbox-consumer-options.js";
import type { ParsedEvent } from "../core/event.js";
import type { DeliveryInfo } from "../core/handler.js";

/** The metadata key `@InboxHandler` writes on the decorated method. */
export const INBOX_HANDLER_METADATA = "rabbit-inbox:handler";

/**
 * The consumer settings a handler may tune, as in `InboxConsumerOptions` (same meaning, same
 * defaults): on `@InboxHandler`, as module-wide defaults (`consumers`), or per handler name in
 * the module's `handlers` (which wins, so that configuration read at start can override what
 * the code says).
 */
export type ConsumerTuning = Partial<Pick<InboxConsumerOptions<unknown, unknown>,
  | "partitions" | "prefetch" | "batchSize" | "concurrency" | "quarantineQueue" | "declareTopology" | "queueArguments"
  | "retryDelaysMs" | "maxDeliveries" | "connectionName" | "confirmTimeoutMs" | "reconnectBaseDelayMs" | "reconnectMaxDelayMs"
  | "requeueDelayMs" | "retry" | "decodeLimits" | "quarantineBodyCap" | "staleFence" | "processSpans">>;

export interface InboxHandlerOptions<E = unknown> extends ConsumerTuning {
  /**
   * The handler name: the dedup scope (`(tenant, handler, event_id)`). Changing it later makes
   * every event new again for this handler.
   */
  handler: string;
  /** The work queue. Required here or in the module's `handlers[handler].queue`. */
  queue?: string;
  /**
   * Validates the decoded JSON body and names the event's identity (see `InboxHandler.parse`).
   * Default: `tenant` and `event_id` string fields, the body itself as the event.
   */
  parse?: (body: Record<string, unknown>, delivery: DeliveryInfo) => ParsedEvent<E>;
  /** Payload fingerprint. Default: SHA-256 of the canonical JSON. */
  fingerprint?: (source: unknown) => string;
  /**
   * The method is set-based, `handleBatch(items, tx)` (see `InboxHandler.handleBatch`), rather
   * than `handle(event, ctx)` called once per event. Default false.
   */
  batch?: boolean;
}

/**
 * Makes a provider's method an idempotent consumer: at application bootstrap the module finds it
 * (Nest's discovery) and starts one `InboxConsumer` on `queue` whose handler is this method,
 * called with the provider as `this`. `handle(event, ctx)`: `ctx.tx` is the store's open
 * transaction (a TypeORM EntityManager, a MikroORM EntityManager...), `ctx.publish` writes to
 * the outbox in it, `ctx.idempotencyKey()` keys outgoing calls. The provider must be a
 * singleton (the default scope).
 */
export function InboxHandler<E = unknown>(options: InboxHandlerOptions<E>): MethodDecorator {
  return SetMetadata(INBOX_HANDLER_METADATA, options);
}
