import { InboxConfigError, PermanentEventError, RetryLaterError } from "./errors.js";
import type { EventKey } from "./event.js";
import { eventScopedHash } from "./fingerprint.js";
import type { BatchItem, BatchRejection, DeliveryInfo, HandlerContext, InboxHandler } from "./handler.js";
import type { IncomingMessage } from "./incoming-message.js";
import type { Instrumentation } from "./instrumentation.js";
import type { Ready } from "./prepared-message.js";
import type { Refusal } from "./refusal.js";
import type { StoreTransaction } from "./store-contract/store.js";
import type { OutboxWriter } from "./outbox-writer.js";
import type { OutboxPublish } from "./publish-options.js";

/**
 * Runs the user's handler on the events to apply, inside the attempt's transaction, and returns
 * the events it refused (by their index in the messages being processed). Any other throw
 * propagates and fails the attempt.
 */
export async function runHandler<E, Tx>(
  { handler, handlerName, instrumentation }: { handler: InboxHandler<E, Tx>; handlerName: string; instrumentation: Instrumentation },
  tx: StoreTransaction<Tx>, messages: readonly IncomingMessage[], toApply: readonly Ready<E>[], outbox: readonly OutboxWriter[],
): Promise<Refusal[]> {
  // A lone event goes through handle() when the handler has both: fewer statements in strict mode.
  const batchCall = handler.handleBatch !== undefined && !(handler.handle && toApply.length === 1);
  // What a traced event publishes continues its own trace. handle() runs in the event's context;
  // one handleBatch() call serves every event, so there each publish does (the context is
  // looked up when it publishes: most handlers publish for few of their events, or none).
  const items: BatchItem<E, Tx>[] = toApply.map((p, i) => {
    const message = messages[p.index]!;
    const ctx = handlerContext(handlerName, tx.handle, p.key, message.delivery, outbox[i]!);
    return { event: p.event, ctx: batchCall && instrumentation.ownsContext(message) ? { ...ctx, publish: publishInContext(instrumentation, message, ctx.publish) } : ctx };
  });
  if (handler.handleBatch && batchCall) {
    let refused: readonly BatchRejection[];
    try {
      refused = (await handler.handleBatch(items, tx.handle)) ?? [];
    } catch (error) {
      // A publish the outbox refused, thrown on as it is or wrapped, is its event's fault: run
      // the batch again without that event rather than splitting it to find out which.
      const i = outbox.findIndex((w) => w.refusedPublish !== undefined && causedBy(error, w.refusedPublish));
      if (i >= 0) return [refusalOf(toApply[i]!.index, outbox[i]!.refusedPublish!)];
      throw error;
    }
    return refused.map((r) => {
      const p = toApply[r.index];
      if (!p) throw new InboxConfigError(`handleBatch rejected index ${r.index}, outside the batch of ${toApply.length}`);
      return { index: p.index, reason: r.reason, detail: r.detail, retryLater: r.retryLater === true };
    });
  }
  for (let i = 0; i < items.length; i++) {
    try {
      const item = items[i]!;
      const traceContext = instrumentation.handlerContext(messages[toApply[i]!.index]!);
      if (traceContext) await instrumentation.inContext(traceContext, () => handler.handle!(item.event, item.ctx));
      else await handler.handle!(item.event, item.ctx);
    } catch (error) {
      const refusedPublish = outbox[i]!.refusedPublish;
      if (refusedPublish && causedBy(error, refusedPublish)) return [refusalOf(toApply[i]!.index, refusedPublish)];
      if (error instanceof PermanentEventError) return [refusalOf(toApply[i]!.index, error)];
      // Not yet rather than never: the rest of the batch goes on without it (and its retry
      // happens on the broker, after a delay, not in this loop).
      if (error instanceof RetryLaterError) {
        return [{ index: toApply[i]!.index, reason: error.reason, detail: error.message, retryLater: true }];
      }
      throw error;
    }
  }
  return [];
}

/** Whether `error` is `cause`, or was thrown because of it (its `cause` chain holds it). */
function causedBy(error: unknown, cause: Error): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 16; e = e.cause, depth++) if (e === cause) return true;
  return false;
}

function refusalOf(index: number, error: PermanentEventError): Refusal {
  return { index, reason: error.reason, detail: error.message };
}

function publishInContext(instrumentation: Instrumentation, message: IncomingMessage, publish: OutboxPublish): OutboxPublish {
  return (exchange, routingKey, body, options) => instrumentation.inContext(instrumentation.handlerContext(message), () => publish(exchange, routingKey, body, options));
}

function handlerContext<Tx>(handler: string, tx: Tx, key: EventKey, delivery: DeliveryInfo, outbox: OutboxWriter): HandlerContext<Tx> {
  const version = outbox.version;
  return {
    tx, key, handler, delivery,
    idempotencyKey: (name = "") => eventScopedHash([key.tenant, handler, key.eventId, name], version),
    publish: outbox.publish,
  };
}
