import type { OutboxSource, Store } from "../core/store-contract/store.js";
import { OutboxWriter, writeOutboxRecords } from "../core/outbox-writer.js";
import { type PublishLimits, defaultPublishLimits } from "../core/publish-checks.js";
import type { OutboxPublish } from "../core/publish-options.js";
import { openTelemetryInstrumentation } from "../observability/message-trace.js";

export interface OutboxTransactionOptions {
  /**
   * Derive message ids from this source and each publish's position, as a handler's do: give a
   * web request's idempotency key as `eventId`, and a retried request re-writes the same ids,
   * which the outbox skips. Default: a random UUID per message (unless `messageId` is passed).
   */
  source?: OutboxSource;
  /**
   * What a publish may carry. Default: bodies up to 16 MiB. A publish over a limit, or one AMQP
   * could not carry, rejects at the call with an InvalidPublishError naming the field.
   */
  publishLimits?: Partial<PublishLimits>;
}

/**
 * The outbox without an incoming message: a web request that writes business data and
 * publishes, atomically.
 *
 *     await new Outbox(store).transaction(async (tx, publish) => {
 *       await tx.query("INSERT INTO orders ...");
 *       await publish("orders", "order.created", { order_id: id });
 *     });
 *
 * The rows commit with the business writes or not at all; the relay publishes them.
 */
export class Outbox<Tx> {
  constructor(private readonly store: Store<Tx>) {}

  /**
   * Runs `work` in one transaction of the store, then writes what it published into the outbox
   * in that same transaction and commits. A throw rolls everything back and rethrows
   * (classified by the store, e.g. TransientStoreError); it is not retried here.
   */
  transaction<T>(work: (tx: Tx, publish: OutboxPublish) => Promise<T>, options: OutboxTransactionOptions = {}): Promise<T> {
    return this.store.transaction(async (stx) => {
      const writer = new OutboxWriter(options.source ?? null, { ...defaultPublishLimits, ...options.publishLimits }, openTelemetryInstrumentation);
      const result = await work(stx.handle, writer.publish);
      await writeOutboxRecords(stx, [writer], this.store.dialect);
      return result;
    });
  }
}
