/**
 * An error of kind `config` met while handling (a misconfiguration or a programming error, not
 * the event's fault) fails loudly: `process()` rejects with it at once. Nothing is retried in
 * process, split, delayed or quarantined for it, and nothing of the attempt commits, so the
 * caller (the consumer) can stop with the error and ack nothing. Before, such an error was taken
 * as transient and ended, after retries and delays, in a `retries_exhausted` quarantine entry
 * that hid the misconfiguration behind an innocent event.
 */
import { describe, expect, it } from "vitest";
import { InboxConfigError } from "../../src/core/errors.js";
import type { BatchItem, InboxHandler } from "../../src/core/handler.js";
import { InboxPipeline, type PipelineOptions } from "../../src/core/pipeline.js";
import type { StoreTransaction } from "../../src/core/store-contract/store.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";
import { incomingMessage } from "../support/messages.js";
import { type LogLine, recordingLogger } from "../support/recording-logger.js";

type Body = { tenant: string; event_id: string };

function setup(handler: Partial<InboxHandler<Body, MemoryHandle>>, options: Partial<PipelineOptions<Body, MemoryHandle>> = {}, store = new MemoryStore()) {
  const lines: LogLine[] = [];
  const delayAsked: string[] = [];
  const full: InboxHandler<Body, MemoryHandle> = {
    name: "config",
    ...(handler.handleBatch ? {} : {
      handle(event: Body, ctx: { tx: MemoryHandle }) {
        ctx.tx.effects.push(event.event_id);
        return Promise.resolve();
      },
    }),
    ...handler,
  };
  const pipeline = new InboxPipeline<Body, MemoryHandle>({
    store, handler: full, logger: recordingLogger(lines),
    retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, maxTotalMs: 1000 },
    canDelayRetry: (delivery) => { delayAsked.push(delivery.queue); return true; },
    ...options,
  });
  return { store, lines, delayAsked, pipeline };
}

const message = (eventId: string, redelivered = false) => incomingMessage({ tenant: "t1", event_id: eventId }, { redelivered });

/** What must not have happened after a config error: no retry, no split, no delay, no quarantine, nothing committed. */
function expectNothingHappened({ store, lines, delayAsked }: ReturnType<typeof setup>, transactions = 1) {
  expect(store.transactions).toBe(transactions);
  expect(store.quarantined).toEqual([]);
  expect(store.effects).toEqual([]);
  expect(store.dedup.size).toBe(0);
  expect(delayAsked).toEqual([]);
  expect(lines.map((l) => l.message)).toEqual([]);
}

/** A MemoryStore whose claims fail the way the MySQL store refuses a handler name longer than its column. */
class TooLongForMysql extends MemoryStore {
  override transaction<T>(work: (tx: StoreTransaction<MemoryHandle>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
    return super.transaction((tx) => work({
      ...tx,
      claim: () => Promise.reject(new InboxConfigError("handler name is 300 UTF-8 bytes; the MySQL store allows 255")),
    }), beforeCommit);
  }
}

describe("a configuration error met while handling", () => {
  it("an identifier longer than the MySQL store allows (the store's claim refuses it): rejected at once", async () => {
    const context = setup({}, {}, new TooLongForMysql());
    const error = await context.pipeline.process([message("e-1")]).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(InboxConfigError);
    expect(error).toMatchObject({ code: "RI_CONFIG", kind: "config", message: "handler name is 300 UTF-8 bytes; the MySQL store allows 255" });
    expectNothingHappened(context);
  });

  it("a handleBatch rejection whose index is outside the batch: rejected at once", async () => {
    const context = setup({
      handleBatch: (items: ReadonlyArray<BatchItem<Body, MemoryHandle>>) => Promise.resolve([{ index: items.length, reason: "account_missing", detail: "no account" }]),
    });
    await expect(context.pipeline.process([message("e-1"), message("e-2")])).rejects.toThrow(new InboxConfigError("handleBatch rejected index 2, outside the batch of 2"));
    // A batch is not split to look for the message responsible: no message is.
    expectNothingHappened(context);
  });

  it("in a batch: the batch is not isolated message by message, and no other outcome is returned", async () => {
    const context = setup({}, {}, new TooLongForMysql());
    await expect(context.pipeline.process([message("e-1"), message("e-2"), incomingMessage("{broken")])).rejects.toBeInstanceOf(InboxConfigError);
    expectNothingHappened(context);
  });

  it("on a first redelivery: both counted at once, then the batch's config error ends process(), as in any batch", async () => {
    const store = new TooLongForMysql();
    store.countRedeliveries = true;
    const context = setup({}, {}, store);
    await expect(context.pipeline.process([message("e-1", true), message("e-2", true)])).rejects.toBeInstanceOf(InboxConfigError);
    // The counts' transaction, then the batch's, which failed.
    expectNothingHappened(context, 2);
    expect([...store.redeliveries.keys()]).toEqual([`config\u0000${JSON.stringify(["t1", "e-1"])}`, `config\u0000${JSON.stringify(["t1", "e-2"])}`]);
  });

  it("on redeliveries processed one by one (e-1 counted before): the first config error ends process(); later messages are not tried", async () => {
    const store = new TooLongForMysql();
    store.countRedeliveries = true;
    const e1 = `config\u0000${JSON.stringify(["t1", "e-1"])}`;
    store.redeliveries.set(e1, 1);
    const context = setup({}, {}, store);
    await expect(context.pipeline.process([message("e-1", true), message("e-2", true)])).rejects.toBeInstanceOf(InboxConfigError);
    // The batch's counts (rolled back), e-1's count and its transaction, which failed; e-2 was never reached.
    expectNothingHappened(context, 3);
    expect(Object.fromEntries(store.redeliveries)).toEqual({ [e1]: 2 });
  });

  it("the same pipeline goes on normally once the cause is gone: a config error leaves no state behind", async () => {
    let broken = true;
    const context = setup({
      handle(event, ctx) {
        if (broken) return Promise.reject(new InboxConfigError("publish() called after its transaction's work returned"));
        ctx.tx.effects.push(event.event_id);
        return Promise.resolve();
      },
    });
    await expect(context.pipeline.process([message("e-1")])).rejects.toBeInstanceOf(InboxConfigError);
    broken = false;
    expect((await context.pipeline.process([message("e-1")])).map((o) => o.kind)).toEqual(["applied"]);
    expect(context.store.effects).toEqual(["e-1"]);
    expect(context.store.quarantined).toEqual([]);
  });
});
