/**
 * The cases of the bring-your-own-transaction suite that read the same on every database: the
 * data layer's write and the inbox record commit or roll back together, duplicates and
 * conflicts, the outbox in the same transaction, and a run through the real broker. The
 * PostgreSQL suite (byo-transaction.ts) and the MySQL one (byo-transaction-mysql.ts) run them on
 * their own databases, beside the cases that differ.
 */
import { randomBytes } from "node:crypto";
import { expect, it } from "vitest";
import { InboxConsumer, type InboxHandler, PermanentEventError } from "../../src/index.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { silentLogger } from "../../src/core/logger.js";
import type { Store } from "../../src/core/store-contract/store.js";
import { amqpUrl, deleteConsumerQueues, publishAll, waitFor } from "./broker.js";
import { incomingMessage } from "./messages.js";

export interface Credit {
  account: string;
  delta: number;
}

export const fastRetry = { maxAttempts: 3, baseDelayMs: 2, maxDelayMs: 10 };

export function creditEvent(eventId: string, account: string, delta: number, tenant = "t1") {
  return { type: "credit", tenant, event_id: eventId, account, delta };
}

/** What the shared cases need of the suite running them; the getters read the current test's. */
export interface ByoCaseContext<Tx> {
  /** The adapter's name: names the handlers and the queue. */
  name: string;
  /** `ri.test.byo` or the like: the start of the queue names. */
  queuePrefix: string;
  store(): Store<Tx>;
  credit(tx: Tx, account: string, delta: number): Promise<void>;
  /** The account's balance, read outside the data layer; null without a row. */
  balance(account: string): Promise<number | null>;
  /** Rows in rabbit_inbox_outbox, read outside the data layer. */
  outboxRows(): Promise<number>;
  /** Run after the test, last in first out. */
  cleanups: Array<() => Promise<unknown>>;
}

/** A handler that credits the event's account through the data layer, then runs `afterWrite`. */
export function creditHandler<Tx>(
  ctx: Pick<ByoCaseContext<Tx>, "name" | "credit">,
  options: { name?: string; afterWrite?: (event: Credit, tx: Tx) => Promise<void> } = {},
): InboxHandler<Credit, Tx> & { calls: number } {
  const handler = {
    name: options.name ?? `byo-${ctx.name}`,
    calls: 0,
    async handle(event: Credit, handlerContext: { tx: Tx }) {
      handler.calls++;
      await ctx.credit(handlerContext.tx, event.account, event.delta);
      await options.afterWrite?.(event, handlerContext.tx);
    },
  };
  return handler;
}

export function pipelineOn<Tx>(handler: InboxHandler<Credit, Tx>, store: Store<Tx>): InboxPipeline<Credit, Tx> {
  return new InboxPipeline<Credit, Tx>({ store, handler, logger: silentLogger, retry: fastRetry });
}

/** The shared cases, inside the caller's `describe` (whose beforeEach migrated the store and created byo_accounts). */
export function byoSharedCases<Tx>(ctx: ByoCaseContext<Tx>): void {
  const { name } = ctx;

  it("applies an event: the data layer's write and the inbox record commit together", async () => {
    const handler = creditHandler(ctx);
    const outcomes = await pipelineOn(handler, ctx.store()).process([incomingMessage(creditEvent("e-1", "a", 100))]);
    expect(outcomes.map((o) => o.kind)).toEqual(["applied"]);
    expect(await ctx.balance("a")).toBe(100);
    expect(await ctx.store().countInbox(handler.name, { tenant: "t1", eventId: "e-1" })).toBe(1);
  });

  it("a handler error after its write rolls back the inbox record and the write together", async () => {
    const store = ctx.store();
    const permanent = creditHandler(ctx, { afterWrite: () => Promise.reject(new PermanentEventError("account_missing", "no such account")) });
    const [refused] = await pipelineOn(permanent, store).process([incomingMessage(creditEvent("e-1", "a", 100))]);
    expect(refused!.kind === "quarantined" && refused!.reason).toBe("account_missing");

    const failing = creditHandler(ctx, { name: "byo-failing", afterWrite: () => Promise.reject(new Error("handler bug")) });
    const [exhausted] = await pipelineOn(failing, store).process([incomingMessage(creditEvent("e-2", "b", 100))]);
    expect(exhausted!.kind === "quarantined" && exhausted!.reason).toBe("retries_exhausted");
    expect(failing.calls).toBe(fastRetry.maxAttempts);

    expect(await ctx.balance("a")).toBeNull();
    expect(await ctx.balance("b")).toBeNull();
    expect(await store.countInbox(permanent.name)).toBe(0);
    expect(await store.countInbox(failing.name)).toBe(0);
    expect((await store.listQuarantine()).map((q) => q.reason).sort()).toEqual(["account_missing", "retries_exhausted"]);
  });

  it("a duplicate skips the handler; a conflict is quarantined with both fingerprints and not applied", async () => {
    const store = ctx.store();
    const handler = creditHandler(ctx);
    const pipeline = pipelineOn(handler, store);
    await pipeline.process([incomingMessage(creditEvent("e-1", "a", 100))]);
    const [duplicate] = await pipeline.process([incomingMessage(creditEvent("e-1", "a", 100), { redelivered: true })]);
    const [conflict] = await pipeline.process([incomingMessage(creditEvent("e-1", "a", 999))]);
    expect(duplicate!.kind).toBe("duplicate");
    expect(conflict!.kind === "quarantined" && conflict!.reason).toBe("conflict");
    expect(handler.calls).toBe(1);
    expect(await ctx.balance("a")).toBe(100);
    const [entry] = await store.listQuarantine({ handler: handler.name });
    expect(entry).toMatchObject({ reason: "conflict", tenant: "t1", eventId: "e-1", occurrences: 1 });
    expect(entry!.storedFingerprint).not.toBe(entry!.fingerprint);
    expect(entry!.firstSeen).toBeInstanceOf(Date);
    expect(Math.abs(entry!.firstSeen.getTime() - Date.now())).toBeLessThan(60_000);
    expect(Buffer.isBuffer(entry!.body) && JSON.parse(entry!.body.toString()).delta).toBe(999);
  });

  it("ctx.publish writes the outbox row in the same transaction; a rollback leaves none", async () => {
    const handler: InboxHandler<Credit, Tx> = {
      name: `byo-${name}-outbox`,
      async handle(event, handlerContext) {
        await ctx.credit(handlerContext.tx, event.account, event.delta);
        await handlerContext.publish("", "byo.credited", { account: event.account, delta: event.delta });
        if (event.delta < 0) throw new PermanentEventError("negative", "refused after publishing");
      },
    };
    const outcomes = await pipelineOn(handler, ctx.store()).process([
      incomingMessage(creditEvent("e-1", "a", 100)), incomingMessage(creditEvent("e-2", "a", -5)),
    ]);
    expect(outcomes.map((o) => (o.kind === "quarantined" ? o.reason : o.kind))).toEqual(["applied", "negative"]);
    expect(await ctx.outboxRows()).toBe(1);
    expect(await ctx.balance("a")).toBe(100);
  });

  it("consumes from the real broker: applied, duplicate, conflict and malformed, with the balance right", async () => {
    const store = ctx.store();
    const queue = `${ctx.queuePrefix}.${name}.${randomBytes(4).toString("hex")}`;
    ctx.cleanups.push(() => deleteConsumerQueues(queue));
    const handler = creditHandler(ctx);
    const consumer = new InboxConsumer<Credit, Tx>({ url: amqpUrl, queue, store, handler, logger: silentLogger, batchSize: 10 });
    ctx.cleanups.push(() => consumer.stop());
    await consumer.start();
    await publishAll(queue, [
      creditEvent("e-1", "acct", 100),
      creditEvent("e-2", "acct", 250),
      creditEvent("e-1", "acct", 100), // redelivered by a producer retry
      creditEvent("e-2", "acct", -250), // same id, other payload
      "{ not json",
    ]);
    const settled = () => Object.values(consumer.outcomeCounts).reduce((a, b) => a + b, 0);
    await waitFor(() => settled() >= 5, 20_000, "five settled deliveries");
    await consumer.stop();
    expect(consumer.outcomeCounts).toMatchObject({ applied: 2, duplicate: 1, quarantined: 2 });
    expect(await ctx.balance("acct")).toBe(350);
    expect(await store.countInbox(handler.name)).toBe(2);
    expect((await store.listQuarantine({ handler: handler.name })).map((q) => q.reason).sort()).toEqual(["conflict", "invalid"]);
  });
}
