/**
 * The pipeline's decision for an event a handler refuses with "retry later", on a real SQLite
 * store: `delayed` while the broker layer has a delayed retry left (nothing of it written),
 * quarantined with the handler's reason once it has none; the rest of the batch applies once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type BatchRejection, type InboxHandler, RetryLaterError } from "../../src/index.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { Outcome } from "../../src/core/outcome.js";
import { silentLogger } from "../../src/core/logger.js";
import type { SqliteDatabase } from "../../src/store/sqlite/index.js";
import { incomingMessage } from "../support/messages.js";
import { type SqliteWithEffects, sqliteWithEffects } from "../support/sqlite-effects.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function fixture(): Promise<SqliteWithEffects> {
  const f = await sqliteWithEffects();
  cleanups.push(f.remove);
  return f;
}

type Ev = { tenant: string; event_id: string; waits?: boolean };
const ev = (id: string, waits = false): Ev => ({ tenant: "t1", event_id: id, ...(waits ? { waits } : {}) });
const summary = (outcomes: readonly Outcome[]) => outcomes.map((o) => `${o.kind}${o.kind === "quarantined" ? `:${o.reason}` : ""} ${o.key?.eventId ?? "?"}`);

/** A set-based handler that refuses `waits` events with `retryLater`, counting its calls. */
function batchHandler(calls: string[][]): InboxHandler<Ev, SqliteDatabase> {
  return {
    name: "retry-later-batch",
    handleBatch(items, tx) {
      calls.push(items.map((i) => i.event.event_id));
      const refused: BatchRejection[] = [];
      items.forEach(({ event }, index) => {
        if (event.waits) refused.push({ index, reason: "parent_missing", detail: `${event.event_id} waits for its parent`, retryLater: true });
        else tx.prepare("INSERT INTO effects (tenant, event_id) VALUES (?, ?)").run(event.tenant, event.event_id);
      });
      return Promise.resolve(refused);
    },
  };
}

describe("pipeline: retry-later refusals", () => {
  it("delays a refused event and its same-batch copy while a delayed retry is left, and applies the rest once", async () => {
    const { store, effects } = await fixture();
    const calls: string[][] = [];
    const pipeline = new InboxPipeline({ store, handler: batchHandler(calls), logger: silentLogger, canDelayRetry: () => true });
    const outcomes = await pipeline.process([ev("a"), ev("w", true), ev("b"), ev("w", true)].map((e) => incomingMessage(e)));
    expect(summary(outcomes)).toEqual(["applied a", "delayed w", "applied b", "delayed w"]);
    expect(outcomes[1]).toMatchObject({ kind: "delayed", detail: "parent_missing: w waits for its parent" });
    // Run once with it, once without it: no in-process retry of the refusal.
    expect(calls).toEqual([["a", "w", "b"], ["a", "b"]]);
    expect(effects()).toEqual(new Map([["a", 1], ["b", 1]]));
    expect(await store.countInbox("retry-later-batch")).toBe(2); // no dedup record for w
    expect(await store.listQuarantine()).toEqual([]);
  });

  it("quarantines it with the handler's reason when no delayed retry is left (or no broker layer can delay it)", async () => {
    const { store, effects } = await fixture();
    for (const canDelayRetry of [() => false, undefined]) {
      const pipeline = new InboxPipeline({ store, handler: batchHandler([]), logger: silentLogger, ...(canDelayRetry ? { canDelayRetry } : {}) });
      const outcomes = await pipeline.process([ev("a"), ev("w", true)].map((e) => incomingMessage(e)));
      expect(summary(outcomes)).toEqual([canDelayRetry ? "applied a" : "duplicate a", "quarantined:parent_missing w"]);
    }
    const [entry] = await store.listQuarantine();
    expect(entry).toMatchObject({ reason: "parent_missing", eventId: "w", detail: "w waits for its parent (still refused with no delayed retry left)", occurrences: 2 });
    expect(effects()).toEqual(new Map([["a", 1]]));
  });

  it("asks whether a delayed retry is left for each refused delivery itself, a same-batch copy included", async () => {
    const { store } = await fixture();
    const asked: unknown[] = [];
    const pipeline = new InboxPipeline({
      store, handler: batchHandler([]), logger: silentLogger,
      canDelayRetry: (delivery) => { asked.push(delivery.headers["n"]); return delivery.headers["n"] === 1; },
    });
    const outcomes = await pipeline.process([
      incomingMessage(ev("a")), incomingMessage(ev("w1", true), { headers: { n: 1 } }), incomingMessage(ev("w2", true), { headers: { n: 2 } }),
      // A second copy of w1 in the same batch, which has no delayed retry left of its own.
      incomingMessage(ev("w1", true), { headers: { n: 2 } }),
    ]);
    expect(summary(outcomes)).toEqual(["applied a", "delayed w1", "quarantined:parent_missing w2", "quarantined:parent_missing w1"]);
    expect(asked).toEqual([1, 2, 2]);
  });

  it("treats a RetryLaterError thrown by handle() or by handleBatch() the same way", async () => {
    const { store, effects } = await fixture();
    let handleCalls = 0;
    const oneByOne: InboxHandler<Ev, SqliteDatabase> = {
      name: "retry-later-handle",
      handle(event, ctx) {
        handleCalls++;
        if (event.waits) throw new RetryLaterError("parent_missing", "not yet");
        ctx.tx.prepare("INSERT INTO effects (tenant, event_id) VALUES (?, ?)").run(event.tenant, event.event_id);
        return Promise.resolve();
      },
    };
    const thrower: InboxHandler<Ev, SqliteDatabase> = {
      name: "retry-later-throws",
      handleBatch(items, tx) {
        for (const { event } of items) {
          if (event.waits) throw new RetryLaterError("parent_missing", "not yet");
          tx.prepare("INSERT INTO effects (tenant, event_id) VALUES (?, ?)").run(event.tenant, `${event.event_id}-batch`);
        }
        return Promise.resolve();
      },
    };
    for (const handler of [oneByOne, thrower]) {
      const pipeline = new InboxPipeline({ store, handler, logger: silentLogger, retry: { maxAttempts: 5, baseDelayMs: 1 }, canDelayRetry: () => true });
      const outcomes = await pipeline.process([ev("a"), ev("w", true), ev("b")].map((e) => incomingMessage(e)));
      expect(summary(outcomes), handler.name).toEqual(["applied a", "delayed w", "applied b"]);
    }
    // handle(): a, then w (refused: the attempt stops there), then a and b in the re-run. w is
    // never retried in process, although 5 attempts were allowed.
    expect(handleCalls).toBe(4);
    expect(effects()).toEqual(new Map([["a", 1], ["b", 1], ["a-batch", 1], ["b-batch", 1]]));
    expect(await store.listQuarantine()).toEqual([]);
  });
});
