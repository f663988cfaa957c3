/**
 * The pipeline's less travelled paths, with the in-memory store: events a handler cannot apply
 * yet, redelivery counting, parsers that fail, handlers with both `handle` and `handleBatch`,
 * the stale fence, accept-new versions, and the outbox nudge for duplicates. The real stores
 * prove the same contracts in the conformance suite; here each decision is pinned without a
 * database, with what must NOT happen alongside.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { InboxConfigError, InboxError, InvalidEventError, PermanentEventError, RetryLaterError, TransientStoreError } from "../../src/core/errors.js";
import type { EventKey } from "../../src/core/event.js";
import { eventScopedHash, fingerprintOf } from "../../src/core/fingerprint.js";
import type { BatchItem, BatchRejection, InboxHandler } from "../../src/core/handler.js";
import type { Outcome } from "../../src/core/outcome.js";
import { InboxPipeline, type PipelineOptions } from "../../src/core/pipeline.js";
import { outboxMessageId } from "../../src/core/outbox-message-id.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";
import { incomingMessage } from "../support/messages.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";

type Body = { tenant: string; event_id: string; [field: string]: unknown };

function setup(handler: Partial<InboxHandler<Body, MemoryHandle>> = {}, options: Partial<PipelineOptions<Body, MemoryHandle>> = {}) {
  const store = new MemoryStore();
  const lines: LogLine[] = [];
  const applied: string[] = [];
  const full: InboxHandler<Body, MemoryHandle> = {
    name: "paths",
    ...(handler.handleBatch ? {} : {
      handle(event: Body, ctx: { tx: MemoryHandle }) {
        applied.push(event.event_id);
        ctx.tx.effects.push(event.event_id);
        return Promise.resolve();
      },
    }),
    ...handler,
  };
  const pipeline = new InboxPipeline<Body, MemoryHandle>({
    store, handler: full, logger: recordingLogger(lines),
    retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, maxTotalMs: 1000 },
    ...options,
  });
  return { store, lines, applied, pipeline };
}

const message = (eventId: string, extra: Record<string, unknown> = {}, redelivered = false) =>
  incomingMessage({ tenant: "t1", event_id: eventId, ...extra }, { redelivered });
const kinds = (outcomes: readonly Outcome[]) => outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));
const key = (eventId: string): EventKey => ({ tenant: "t1", eventId });

describe("an event the handler cannot apply yet (RetryLaterError)", () => {
  const notYet = (id: string) => (event: Body) => event.event_id === id
    ? Promise.reject(new RetryLaterError("account_missing", `account of ${id} not open yet`))
    : Promise.resolve();

  it("goes to a delayed retry while the broker layer has one, without a quarantine row; the rest of the batch applies", async () => {
    const asked: string[] = [];
    const { store, lines, pipeline } = setup({ handle: notYet("e-2") }, { canDelayRetry: (d) => { asked.push(d.queue); return true; } });
    const outcomes = await pipeline.process([message("e-1"), message("e-2"), message("e-3")]);
    expect(kinds(outcomes)).toEqual(["applied", "delayed", "applied"]);
    expect(outcomes[1]).toEqual({ kind: "delayed", key: key("e-2"), detail: "account_missing: account of e-2 not open yet" });
    expect(asked).toEqual(["test.events"]);
    expect(store.quarantined).toEqual([]);
    expect(store.transactions).toBe(2); // refused, then run again without it: no isolation of the batch
    expect(logged(lines, "batch failed; isolating its messages one by one")).toEqual([]);
    // Not claimed: its delayed copy is a first delivery, not a duplicate.
    expect(await store.countInbox("paths")).toBe(2);
    expect(logged(lines, "transaction failed, retrying")).toEqual([]);
  });

  it("is quarantined with the handler's reason once no delayed retry is left, and the detail says so", async () => {
    const { store, pipeline } = setup({ handle: notYet("e-2") }, { canDelayRetry: () => false });
    const outcomes = await pipeline.process([message("e-1"), message("e-2")]);
    expect(kinds(outcomes)).toEqual(["applied", "quarantined:account_missing"]);
    expect(outcomes[1]).toMatchObject({ detail: "account of e-2 not open yet (still refused with no delayed retry left)" });
    expect(store.quarantined.map((r) => [r.reason, r.detail])).toEqual([["account_missing", "account of e-2 not open yet (still refused with no delayed retry left)"]]);
  });

  it("is quarantined at once without a canDelayRetry (no broker layer to delay it)", async () => {
    const { pipeline } = setup({ handle: notYet("e-1") });
    expect(kinds(await pipeline.process([message("e-1")]))).toEqual(["quarantined:account_missing"]);
  });

  it("refused through handleBatch with retryLater: delayed; without it: quarantined at once", async () => {
    const { store, pipeline } = setup({
      handleBatch: (items: ReadonlyArray<BatchItem<Body, MemoryHandle>>) => {
        const refusals: BatchRejection[] = [];
        items.forEach(({ event }, index) => {
          if (event.event_id === "later") refusals.push({ index, reason: "account_missing", detail: "not yet", retryLater: true });
          if (event.event_id === "never") refusals.push({ index, reason: "account_closed", detail: "closed" });
        });
        return Promise.resolve(refusals);
      },
    }, { canDelayRetry: () => true });
    const outcomes = await pipeline.process([message("ok"), message("later"), message("never")]);
    expect(kinds(outcomes)).toEqual(["applied", "delayed", "quarantined:account_closed"]);
    expect(store.quarantined.map((r) => r.reason)).toEqual(["account_closed"]);
  });

  it("thrown out of the transaction for a lone event (not by handle): delayed at once, no in-process retry", async () => {
    const { store, lines, pipeline } = setup({
      handleBatch: () => Promise.reject(new RetryLaterError("account_missing", "not yet")),
    }, { canDelayRetry: () => true });
    const [outcome] = await pipeline.process([message("e-1")]);
    expect(outcome).toEqual({ kind: "delayed", key: key("e-1"), detail: "account_missing: not yet" });
    expect(store.transactions).toBe(2); // the refused attempt, then the one without it
    expect(logged(lines, "transaction failed, retrying")).toEqual([]);
  });
});

describe("a permanent refusal", () => {
  it("thrown by handle() in a batch: the transaction runs again without that event, no one-by-one isolation", async () => {
    const { store, lines, pipeline } = setup({
      handle(event: Body, ctx: { tx: MemoryHandle }) {
        if (event.event_id === "e-1") return Promise.reject(new PermanentEventError("account_closed", "closed"));
        ctx.tx.effects.push(event.event_id);
        return Promise.resolve();
      },
    });
    const outcomes = await pipeline.process([message("e-1"), message("e-2")]);
    expect(kinds(outcomes)).toEqual(["quarantined:account_closed", "applied"]);
    expect(store.transactions).toBe(2);
    expect(logged(lines, "batch failed; isolating its messages one by one")).toEqual([]);
    expect(store.effects).toEqual(["e-2"]);
  });

  it("copies of a refused event in the same batch share its fate, each quarantined", async () => {
    const { store, lines, pipeline } = setup({ handle: (e: Body) => (e.event_id === "e-1" ? Promise.reject(new PermanentEventError("account_closed", "closed")) : Promise.resolve()) });
    const outcomes = await pipeline.process([message("e-1"), message("e-1"), message("e-2")]);
    expect(kinds(outcomes)).toEqual(["quarantined:account_closed", "quarantined:account_closed", "applied"]);
    expect(store.quarantined).toHaveLength(2);
    // Settled in the rerun without the refused event, not by isolating the batch after failures.
    expect(store.transactions).toBe(2);
    expect(lines).toEqual([]);
  });

  it("that keeps failing the transaction after the event was set aside is quarantined as retries_exhausted, not looped on", async () => {
    const { store, pipeline } = setup({}, {
      hook: (point) => { if (point === "before-commit") throw new PermanentEventError("ledger_closed", "ledger closed"); },
    });
    const [outcome] = await pipeline.process([message("e-1")]);
    expect(outcome).toMatchObject({ kind: "quarantined", reason: "retries_exhausted", detail: "gave up after 2 attempts: ledger closed" });
    expect(store.effects).toEqual([]);
    expect(await store.countInbox("paths")).toBe(0);
  });

  it("the same for an invalid message whose quarantine transaction is refused", async () => {
    const { store, pipeline } = setup({}, {
      hook: (point) => { if (point === "before-commit") throw new PermanentEventError("ledger_closed", "ledger closed"); },
    });
    const [outcome] = await pipeline.process([incomingMessage("{broken")]);
    expect(outcome).toMatchObject({ kind: "quarantined", reason: "retries_exhausted", detail: "gave up after 1 attempts: ledger closed" });
    expect(store.quarantined).toHaveLength(1);
  });

  it("an error of kind permanent that carries no reason is quarantined as invalid", async () => {
    const { store, pipeline } = setup({ handleBatch: () => Promise.reject(new InboxError("RI_CUSTOM", "permanent", "custom refusal")) });
    const [outcome] = await pipeline.process([message("e-1")]);
    expect(outcome).toMatchObject({ kind: "quarantined", reason: "invalid", detail: "custom refusal" });
    expect(store.quarantined.map((r) => r.reason)).toEqual(["invalid"]);
  });

  it("a refusal is not a failed attempt: the rerun still gets every in-process retry", async () => {
    const { store, lines, pipeline } = setup({
      handleBatch: (items: ReadonlyArray<BatchItem<Body, MemoryHandle>>) => Promise.resolve(items.flatMap(({ event }, index) => (event.event_id === "bad" ? [{ index, reason: "account_closed", detail: "closed" }] : []))),
    });
    // Attempt 1 is refused; the reruns fail twice with a deadlock, then commit.
    store.script = (n) => { if (n === 2 || n === 3) throw new TransientStoreError("deadlock detected"); return "commit"; };
    const outcomes = await pipeline.process([message("ok"), message("bad")]);
    expect(kinds(outcomes)).toEqual(["applied", "quarantined:account_closed"]);
    expect(logged(lines, "transaction failed, retrying").map((l) => l.fields?.attempt)).toEqual([1, 2]);
    expect(store.transactions).toBe(4);
  });
});

describe("handlers", () => {
  it("with both handle and handleBatch: a lone event goes through handle, a batch through handleBatch", async () => {
    const calls: string[] = [];
    const { pipeline } = setup({
      handle: (e: Body) => { calls.push(`handle:${e.event_id}`); return Promise.resolve(); },
      handleBatch: (items: ReadonlyArray<BatchItem<Body, MemoryHandle>>) => { calls.push(`batch:${items.map((i) => i.event.event_id).join(",")}`); return Promise.resolve(); },
    });
    expect(kinds(await pipeline.process([message("e-1")]))).toEqual(["applied"]);
    expect(kinds(await pipeline.process([message("e-2"), message("e-3")]))).toEqual(["applied", "applied"]);
    expect(calls).toEqual(["handle:e-1", "batch:e-2,e-3"]);
  });

  it("handleBatch is never called with an empty batch (all duplicates or invalid), and may return nothing", async () => {
    const batches: string[][] = [];
    const { pipeline } = setup({
      handleBatch: (items: ReadonlyArray<BatchItem<Body, MemoryHandle>>) => { batches.push(items.map((i) => i.event.event_id)); return Promise.resolve(); },
    });
    expect(kinds(await pipeline.process([message("e-1"), message("e-2")]))).toEqual(["applied", "applied"]);
    expect(kinds(await pipeline.process([message("e-1"), incomingMessage("{broken"), message("e-2")]))).toEqual(["duplicate", "quarantined:invalid", "duplicate"]);
    expect(batches).toEqual([["e-1", "e-2"]]);
  });

  it("a batch of invalid messages only claims nothing", async () => {
    const { store, pipeline } = setup();
    expect(kinds(await pipeline.process([incomingMessage("{broken"), incomingMessage("[]")]))).toEqual(["quarantined:invalid", "quarantined:invalid"]);
    expect(store.claimCalls).toEqual([]);
  });

  it("a handleBatch rejection outside the batch is a configuration error, named as such: process() rejects with it", async () => {
    const { store, lines, pipeline } = setup({ handleBatch: () => Promise.resolve([{ index: 5, reason: "x", detail: "y" }]) }, { canDelayRetry: () => false });
    await expect(pipeline.process([message("e-1")])).rejects.toThrow(new InboxConfigError("handleBatch rejected index 5, outside the batch of 1"));
    // Failed loudly at once: not retried, not quarantined as retries_exhausted (config errors are
    // covered in depth in pipeline-config-errors.test.ts).
    expect(logged(lines, "transaction failed, retrying")).toEqual([]);
    expect(store.transactions).toBe(1);
    expect(store.quarantined).toEqual([]);
    expect(store.effects).toEqual([]);
  });
});

describe("parsing", () => {
  it("a parser that crashes: quarantined as invalid, with the key still read for the operator", async () => {
    const { store, pipeline } = setup({ parse: () => { throw new TypeError("Cannot read properties of undefined (reading 'id')"); } });
    const [outcome] = await pipeline.process([message("e-1")]);
    expect(outcome).toMatchObject({ kind: "quarantined", reason: "invalid", key: key("e-1"), detail: "parse failed: Cannot read properties of undefined (reading 'id')" });
    expect(store.quarantined[0]?.key).toEqual(key("e-1"));
  });

  it("a parser's InvalidEventError keeps its own message as the detail", async () => {
    const { pipeline } = setup({ parse: () => { throw new InvalidEventError("delta_cents must be a safe integer"); } });
    expect(await pipeline.process([message("e-1")])).toMatchObject([{ kind: "quarantined", reason: "invalid", key: key("e-1"), detail: "delta_cents must be a safe integer" }]);
  });

  it("an event identified by its parser keeps that key when a later step refuses it", async () => {
    const { pipeline } = setup({
      parse: (body: Record<string, unknown>) => ({ key: { tenant: String(body.org), eventId: String(body.id) }, event: body as Body }),
      fingerprint: () => { throw new InvalidEventError("cannot fingerprint"); },
    });
    const [outcome] = await pipeline.process([incomingMessage({ org: "o9", id: "x-1", tenant: "t1", event_id: "e-1" })]);
    expect(outcome).toMatchObject({ kind: "quarantined", reason: "invalid", key: { tenant: "o9", eventId: "x-1" }, detail: "cannot fingerprint" });
  });

  it("prepareAhead's work is reused by process, not done twice", async () => {
    let parses = 0;
    const { pipeline } = setup({ parse: (body: Record<string, unknown>) => { parses++; return { key: { tenant: String(body.tenant), eventId: String(body.event_id) }, event: body as Body }; } });
    const m = message("e-1");
    pipeline.prepareAhead(m);
    expect(parses).toBe(1);
    expect(kinds(await pipeline.process([message("e-0"), m]))).toEqual(["applied", "applied"]);
    expect(parses).toBe(2);
  });

  it("applies the configured decode limits on top of the defaults", async () => {
    const { pipeline } = setup({}, { decodeLimits: { maxDepth: 1 } });
    expect(await pipeline.process([message("e-1", { nested: { a: 1 } })])).toMatchObject([{ kind: "quarantined", reason: "invalid", detail: "nesting deeper than 1 at $.nested" }]);
    expect(kinds(await pipeline.process([message("e-2", { flat: 1 })]))).toEqual(["applied"]);
  });
});

describe("redeliveries and poison messages", () => {
  const redelivered = (eventId: string, deliveryCount?: number, flag = true) => {
    const m = message(eventId, {}, flag);
    m.delivery.deliveryCount = deliveryCount;
    return m;
  };

  it("a batch redelivered for the first time: only its redelivered, identified events are counted, in one transaction, then it runs as one batch", async () => {
    const { store, pipeline } = setup();
    store.countRedeliveries = true;
    const outcomes = await pipeline.process([redelivered("e-1"), message("e-2"), redelivered("e-3"), incomingMessage("{broken", { redelivered: true })]);
    expect(kinds(outcomes)).toEqual(["applied", "applied", "applied", "quarantined:invalid"]);
    expect([...store.redeliveries]).toEqual([
      ["paths\u0000" + JSON.stringify(["t1", "e-1"]), 1],
      ["paths\u0000" + JSON.stringify(["t1", "e-3"]), 1],
    ]);
    expect(store.transactions).toBe(2); // the counts, then the batch: not one transaction per message
  });

  it("a lone redelivered message is counted in a transaction of its own, once, then applied", async () => {
    const { store, pipeline } = setup();
    store.countRedeliveries = true;
    store.redeliveries.set("paths\u0000" + JSON.stringify(["t1", "e-1"]), 1);
    expect(kinds(await pipeline.process([redelivered("e-1")]))).toEqual(["applied"]);
    expect([...store.redeliveries.values()]).toEqual([2]);
    expect(store.transactions).toBe(2); // no batch count to roll back first
  });

  it("the same event twice in a redelivered batch is counted once: the batch still runs as one, the copy a duplicate", async () => {
    const { store, pipeline } = setup();
    store.countRedeliveries = true;
    expect(kinds(await pipeline.process([redelivered("e-1"), redelivered("e-1")]))).toEqual(["applied", "duplicate"]);
    expect([...store.redeliveries.values()]).toEqual([1]);
    expect(store.transactions).toBe(2);
  });

  it("a batch with an event counted before: the batch's counts roll back, and each message runs alone, each redelivered one counted first", async () => {
    const { store, applied, pipeline } = setup();
    store.countRedeliveries = true;
    store.redeliveries.set("paths\u0000" + JSON.stringify(["t1", "e-2"]), 1);
    const outcomes = await pipeline.process([redelivered("e-1"), redelivered("e-2"), message("e-3")]);
    expect(kinds(outcomes)).toEqual(["applied", "applied", "applied"]);
    // e-1 was counted once, by its own count: the batch's count of it rolled back with the batch's.
    expect(Object.fromEntries(store.redeliveries)).toEqual({
      ["paths\u0000" + JSON.stringify(["t1", "e-1"])]: 1,
      ["paths\u0000" + JSON.stringify(["t1", "e-2"])]: 2,
    });
    // The rolled-back counts, then count + event for e-1 and e-2, then e-3 alone.
    expect(store.transactions).toBe(6);
    expect(applied).toEqual(["e-1", "e-2", "e-3"]);
  });

  it("a batch redelivered for the first time at a limit of one delivery: each redelivered event is poison, the rest of the batch applies", async () => {
    const { store, applied, pipeline } = setup({}, { maxDeliveries: 1 });
    store.countRedeliveries = true;
    expect(kinds(await pipeline.process([redelivered("e-1"), message("e-2")]))).toEqual(["quarantined:retries_exhausted", "applied"]);
    expect(applied).toEqual(["e-2"]);
  });

  it("a quorum queue's delivery count alone marks a redelivery", async () => {
    const { store, pipeline } = setup();
    store.countRedeliveries = true;
    await pipeline.process([redelivered("e-1", 2, false)]);
    expect(store.redeliveries.size).toBe(1);
  });

  it("reaching maxDeliveries by the store's count: quarantined as retries_exhausted, never applied", async () => {
    const { store, applied, pipeline } = setup({}, { maxDeliveries: 2 });
    store.countRedeliveries = true;
    expect(kinds(await pipeline.process([redelivered("e-1")]))).toEqual(["applied"]);
    store.dedup.clear(); // as if the first application had crashed before its commit
    expect(kinds(await pipeline.process([redelivered("e-1")]))).toEqual(["quarantined:retries_exhausted"]);
    expect(applied).toEqual(["e-1"]);
    expect(store.quarantined[0]?.detail).toBe("redelivered 2 times without being settled (poison message: it may crash or stall its consumer; limit 2)");
  });

  it("a store that cannot count: the broker's delivery count decides, and the pipeline stops asking", async () => {
    const { store, applied, pipeline } = setup({}, { maxDeliveries: 3 });
    expect(kinds(await pipeline.process([redelivered("e-1", 3)]))).toEqual(["quarantined:retries_exhausted"]);
    expect(store.transactions).toBe(3); // the count it could not make, then the event's (run again without the poison)
    // Known now: a batch with a redelivery is one transaction, and x-delivery-count still counts.
    expect(kinds(await pipeline.process([redelivered("e-2", 3), message("e-3")]))).toEqual(["quarantined:retries_exhausted", "applied"]);
    expect(store.transactions).toBe(5);
    expect(kinds(await pipeline.process([redelivered("e-4", 2)]))).toEqual(["applied"]);
    expect(applied).toEqual(["e-3", "e-4"]);
  });

  it("a store that cannot count, met with a batch: the batch runs as one with the broker's counts, and no later batch asks again", async () => {
    const { store, lines, pipeline } = setup({}, { maxDeliveries: 3 });
    expect(kinds(await pipeline.process([redelivered("e-1", 3), redelivered("e-2", 1)]))).toEqual(["quarantined:retries_exhausted", "applied"]);
    // The count it could not make, then the batch (run again without the poison).
    expect(store.transactions).toBe(3);
    expect(kinds(await pipeline.process([redelivered("e-3", 1), redelivered("e-4", 1)]))).toEqual(["applied", "applied"]);
    expect(store.transactions).toBe(4);
    expect(lines.filter((l) => l.level !== "debug" || l.message.startsWith("could not count"))).toEqual([]);
  });

  it("a count that fails: logged with the event, and the broker's count decides", async () => {
    const { store, lines, pipeline } = setup({}, { maxDeliveries: 3 });
    store.countRedeliveries = true;
    const original = store.transaction.bind(store);
    let failures = 0;
    // The batch's count fails, then e-1's own count: the broker's count (5) decides for e-1.
    store.transaction = (work, beforeCommit) => {
      if (failures < 2) { failures++; return Promise.reject(new TransientStoreError("lock wait timeout")); }
      return original(work, beforeCommit);
    };
    expect(kinds(await pipeline.process([redelivered("e-1", 5), redelivered("e-2")]))).toEqual(["quarantined:retries_exhausted", "applied"]);
    expect(logged(lines, "could not count a batch's redeliveries at once; each message is counted on its own")).toEqual([{
      level: "debug", message: "could not count a batch's redeliveries at once; each message is counted on its own",
      fields: { handler: "paths", error: "lock wait timeout" },
    }]);
    expect(logged(lines, "could not count a redelivery; poison detection falls back on the broker's delivery count")).toEqual([{
      level: "warn", message: "could not count a redelivery; poison detection falls back on the broker's delivery count",
      fields: { handler: "paths", tenant: "t1", eventId: "e-1", error: "lock wait timeout" },
    }]);
  });
});

describe("the stale fence", () => {
  it("quarantines a first-seen event at or before the horizon, and its copies in the batch, naming both times", async () => {
    const { store, lines, applied, pipeline } = setup();
    store.horizon = new Date("2026-01-01T00:00:00.000Z");
    const old = (id: string) => incomingMessage({ tenant: "t1", event_id: id }, {});
    const m1 = old("e-1");
    const m2 = old("e-1");
    m1.delivery.timestamp = new Date("2025-12-31T00:00:00.000Z");
    m2.delivery.timestamp = new Date("2025-12-31T00:00:00.000Z");
    const fresh = message("e-2");
    fresh.delivery.timestamp = new Date("2026-01-02T00:00:00.000Z");
    const outcomes = await pipeline.process([m1, m2, fresh]);
    expect(kinds(outcomes)).toEqual(["quarantined:stale", "quarantined:stale", "applied"]);
    const detail = "event e-1 of tenant t1 has event time 2025-12-31T00:00:00.000Z, at or before the purge horizon 2026-01-01T00:00:00.000Z, and no dedup record: it may have been applied and purged, so it is not applied blindly";
    expect(outcomes[0]).toMatchObject({ detail });
    expect(store.quarantined.map((r) => [r.reason, r.eventTime?.toISOString()])).toEqual([["stale", "2025-12-31T00:00:00.000Z"], ["stale", "2025-12-31T00:00:00.000Z"]]);
    expect(applied).toEqual(["e-2"]);
    const warned = logged(lines, "stale event: older than the purge horizon and not in the dedup table; quarantined, not applied");
    expect(warned).toHaveLength(2);
    expect(warned[0]).toEqual({
      level: "warn", message: "stale event: older than the purge horizon and not in the dedup table; quarantined, not applied",
      fields: { handler: "paths", tenant: "t1", eventId: "e-1", eventTime: "2025-12-31T00:00:00.000Z", horizon: "2026-01-01T00:00:00.000Z" },
    });
  });

  it("a quarantine row keeps the event time read from the body when the message has no AMQP timestamp", async () => {
    const { store, pipeline } = setup({ handle: () => Promise.reject(new PermanentEventError("account_closed", "closed")) }, { staleFence: { eventTimeField: "occurred_at" } });
    await pipeline.process([message("e-1", { occurred_at: "2026-03-04T05:06:07Z" })]);
    expect(store.quarantined[0]?.eventTime?.toISOString()).toBe("2026-03-04T05:06:07.000Z");
    await pipeline.process([incomingMessage("{broken")]);
    expect(store.quarantined[1]?.eventTime).toBeNull();
  });
});

describe("a version that replaced an applied one (accept-new)", () => {
  it("gets idempotency keys and outbox message ids of its own; other events keep theirs", async () => {
    const { store, pipeline } = setup({
      handle: async (event: Body, ctx) => {
        ctx.tx.effects.push(ctx.idempotencyKey("pay"));
        await ctx.publish("x", "rk", { for: event.event_id });
      },
    });
    store.outbox = [];
    store.replacing.set(JSON.stringify(["t1", "e-new"]), "old-fingerprint");
    await pipeline.process([message("e-new", { v: 2 }), message("e-plain")]);
    const version = fingerprintOf({ tenant: "t1", event_id: "e-new", v: 2 });
    expect(store.effects).toEqual([
      eventScopedHash(["t1", "paths", "e-new", "pay"], version),
      eventScopedHash(["t1", "paths", "e-plain", "pay"], undefined),
    ]);
    expect(store.outbox.map((r) => [r.messageId, r.source])).toEqual([
      [outboxMessageId({ tenant: "t1", handler: "paths", eventId: "e-new", version }, 0), { tenant: "t1", handler: "paths", eventId: "e-new", version }],
      [outboxMessageId({ tenant: "t1", handler: "paths", eventId: "e-plain" }, 0), { tenant: "t1", handler: "paths", eventId: "e-plain" }],
    ]);
  });
});

describe("the outbox nudge for duplicates", () => {
  function nudging(due: number | Error) {
    const ctx = setup();
    const calls: Array<[string, EventKey[]]> = [];
    ctx.store.resendOutbox = (handler, keys) => {
      calls.push([handler, [...keys]]);
      return due instanceof Error ? Promise.reject(due) : Promise.resolve(due);
    };
    return { ...ctx, calls };
  }

  it("asks the store once per batch, after commit, for the distinct keys of its duplicates only", async () => {
    const { store, lines, calls, pipeline } = nudging(2);
    await pipeline.process([message("e-1"), message("e-2")]);
    expect(calls).toEqual([]);
    const committedBefore: number[] = [];
    const resend = store.resendOutbox!;
    store.resendOutbox = (handler, keys) => { committedBefore.push(store.dedup.size); return resend(handler, keys); };
    expect(kinds(await pipeline.process([message("e-1"), message("e-3"), message("e-1"), message("e-2")]))).toEqual(["duplicate", "applied", "duplicate", "duplicate"]);
    expect(calls).toEqual([["paths", [key("e-1"), key("e-2")]]]);
    expect(committedBefore).toEqual([3]); // e-3's claim had committed
    expect(logged(lines, "duplicates had unsent outbox messages; the relay was nudged")).toEqual([{
      level: "info", message: "duplicates had unsent outbox messages; the relay was nudged", fields: { handler: "paths", duplicates: 2, messages: 2 },
    }]);
  });

  it("says nothing when no row was due", async () => {
    const { lines, calls, pipeline } = nudging(0);
    await pipeline.process([message("e-1")]);
    await pipeline.process([message("e-1")]);
    expect(calls).toHaveLength(1);
    expect(lines).toEqual([]);
  });

  it("a failed nudge changes no outcome: warned about, the relay's polling finds the rows", async () => {
    const { lines, pipeline } = nudging(new Error("database is locked"));
    await pipeline.process([message("e-1")]);
    expect(kinds(await pipeline.process([message("e-1")]))).toEqual(["duplicate"]);
    expect(lines).toEqual([{
      level: "warn", message: "could not nudge the outbox relay for duplicates; it finds the rows at its next poll", fields: { handler: "paths", error: "database is locked" },
    }]);
  });

  it("a burst of duplicate batches writes one nudge line, the rest are counted for a minute", async () => {
    const { lines, pipeline } = nudging(1);
    await pipeline.process([message("e-1")]);
    for (let i = 0; i < 3; i++) await pipeline.process([message("e-1")]);
    await sleep(20);
    expect(lines).toHaveLength(1);
  });
});

describe("quarantine rows", () => {
  it("keep the body whole up to the cap, and cut it at the cap beyond", async () => {
    const body = JSON.stringify({ tenant: "t1", event_id: "e-1", pad: "xxxx" });
    const atCap = setup({ handle: () => Promise.reject(new PermanentEventError("r", "d")) }, { quarantineBodyCap: body.length });
    await atCap.pipeline.process([incomingMessage(body)]);
    expect(atCap.store.quarantined.map((r) => [r.body.toString(), r.bodyTruncated])).toEqual([[body, false]]);
    const under = setup({ handle: () => Promise.reject(new PermanentEventError("r", "d")) }, { quarantineBodyCap: body.length - 1 });
    await under.pipeline.process([incomingMessage(body)]);
    expect(under.store.quarantined.map((r) => [r.body.toString(), r.bodyTruncated])).toEqual([[body.slice(0, -1), true]]);
  });

  it("escape a NUL in a handler's detail, which PostgreSQL text cannot store", async () => {
    const { store, pipeline } = setup({ handle: () => Promise.reject(new PermanentEventError("r", "bad\u0000name")) });
    await pipeline.process([message("e-1")]);
    expect(store.quarantined[0]?.detail).toBe("bad\\u0000name");
  });
});
