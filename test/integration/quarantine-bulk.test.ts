/**
 * Bulk quarantine operations through the library against real PostgreSQL, MariaDB and SQLite
 * and the real broker: every filter narrows the selection in the store's SQL; groups by
 * normalised cause with their counts and times; bulk discard with its audit; bulk replay with
 * a dry run, conflicts skipped unless accepted, a second run that publishes nothing, two runs
 * at once that never replay an entry twice, the rate limit, and an interrupted replay finished
 * by the next run under its own audit record.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PermanentEventError } from "../../src/core/errors.js";
import { purgeExpiredDedupRecords } from "../../src/operations.js";
import {
  AmqpReplayPublisher, type BulkResult, type QuarantineDetail, bulkDiscard, bulkReplay, quarantineGroups,
} from "../../src/operations.js";
import { groupKeyOfEntry } from "../../src/quarantine/quarantine-cause.js";
import { replayMessage } from "../../src/quarantine/replay.js";
import { amqpUrl, deleteQueues, drainQueue, withChannel } from "../support/broker.js";
import { HANDLER, type RetentionFixture, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES } from "../support/test-databases.js";

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

let publisher: AmqpReplayPublisher;
beforeAll(async () => { publisher = await AmqpReplayPublisher.connect(amqpUrl); });
afterAll(async () => { await publisher.close(); });

async function freshQueue(): Promise<string> {
  const queue = `ri.test.bulk.${randomBytes(4).toString("hex")}`;
  await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
  cleanups.push(() => deleteQueues(queue));
  return queue;
}

const MISSING = (account: string, tenant: string) => `account "${account}" of tenant ${tenant} was never opened`;
const LIMIT = (n: number) => `amount ${n} exceeds the limit of 10`;

/**
 * Quarantine entries made by the real pipeline: account_missing (3 in t1, 2 in t2), a conflict,
 * an invalid message; then, after `boundary`, two over-limit refusals.
 */
async function quarantined(f: RetentionFixture, queue: string) {
  const refusing = (detail: (e: Record<string, unknown>) => string, reason = "account_missing") => f.pipeline({
    handler: { name: HANDLER, handle(e: Record<string, unknown>) { return Promise.reject(new PermanentEventError(reason, detail(e))); } },
  });
  const missing = refusing((e) => MISSING(String(e.account), String(e.tenant)));
  for (const [id, tenant] of [["m-1", "t1"], ["m-2", "t1"], ["m-3", "t1"], ["m-4", "t2"], ["m-5", "t2"]] as const) {
    await missing.process([delivery(event(id, { tenant, account: `acc-${id}`, n: 1 }), { queue })]);
  }
  const pipeline = f.pipeline();
  await pipeline.process([delivery(event("c-1", { n: 1 }), { queue })]);
  await pipeline.process([delivery(event("c-1", { n: 2 }), { queue })]); // conflict
  await pipeline.process([delivery("{broken" as unknown as object, { queue })]); // invalid
  await sleep(30);
  const boundary = await f.ops.now();
  await sleep(30);
  const over = refusing((e) => LIMIT(Number(e.n)), "over_limit");
  await over.process([delivery(event("l-1", { n: 25 }), { queue })]);
  await over.process([delivery(event("l-2", { n: 31 }), { queue })]);
  const all = await f.ops.listQuarantineEntries({ limit: 1000 });
  expect(all).toHaveLength(9);
  return { boundary, all, byEvent: (id: string) => all.find((e) => e.eventId === id)! };
}

/** Takes the replayed messages off the queue and runs them through the normal pipeline. */
async function consume(f: RetentionFixture, queue: string): Promise<{ eventIds: string[]; outcomes: string[] }> {
  const messages = await drainQueue(queue);
  const pipeline = f.pipeline();
  const outcomes: string[] = [];
  for (const m of messages) {
    // The AMQP timestamp travels with a replay: the stale fence judges the event by it.
    const stamped = typeof m.properties.timestamp === "number" ? { timestamp: new Date(m.properties.timestamp * 1000) } : {};
    const [o] = await pipeline.process([delivery(JSON.parse(m.content.toString()) as object, { queue, ...stamped })]);
    outcomes.push(o!.kind);
  }
  return { eventIds: messages.map((m) => String((JSON.parse(m.content.toString()) as { event_id: string }).event_id)), outcomes };
}

const ids = (entries: readonly QuarantineDetail[]) => entries.map((e) => e.eventId ?? `#${e.id}`).sort();

describe.each(TEST_DATABASES)("bulk quarantine operations on %s", (kind) => {
  it("each filter narrows the selection in SQL; groups count entries by normalised cause with first and last seen", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const { boundary, all, byEvent } = await quarantined(f, queue);
    const list = (filter: Parameters<typeof f.ops.listQuarantineEntries>[0]) => f.ops.listQuarantineEntries({ limit: 1000, ...filter });

    expect(ids(await list({ handler: HANDLER }))).toHaveLength(9);
    expect(await list({ handler: "other" })).toEqual([]);
    expect(ids(await list({ reason: "over_limit" }))).toEqual(["l-1", "l-2"]);
    expect(ids(await list({ tenant: "t2" }))).toEqual(["m-4", "m-5"]);
    expect(ids(await list({ since: boundary }))).toEqual(["l-1", "l-2"]);
    expect(ids(await list({ until: boundary }))).toHaveLength(7);
    expect(ids(await list({ until: boundary }))).not.toContain("l-1");
    expect(ids(await list({ fingerprint: byEvent("m-2").fingerprint! }))).toEqual(["m-2"]);
    expect(ids(await list({ text: "NEVER OPENED" }))).toEqual(["m-1", "m-2", "m-3", "m-4", "m-5"]);
    expect(ids(await list({ text: 'tenant t2 was' }))).toEqual(["m-4", "m-5"]);
    expect(ids(await list({ text: "no such words" }))).toEqual([]);
    expect(ids(await list({ tenant: "t1", reason: "account_missing", since: boundary }))).toEqual([]);
    const sorted = [...all].sort((a, b) => a.id - b.id);
    expect((await list({ afterId: sorted[6]!.id })).map((e) => e.id)).toEqual(sorted.slice(7).map((e) => e.id));
    expect((await list({ limit: 3 })).map((e) => e.id)).toEqual(sorted.slice(0, 3).map((e) => e.id));
    expect(await list({ status: "replayed" })).toEqual([]);

    const groups = await quarantineGroups(f.ops);
    // Largest first; the two groups of one entry each may be seen in the same millisecond.
    expect(groups.slice(0, 2).map((g) => [g.reason, g.entries, g.cause])).toEqual([
      ["account_missing", 5, 'account "…" of tenant t<n> was never opened'],
      ["over_limit", 2, "amount <n> exceeds the limit of <n>"],
    ]);
    expect(groups.slice(2).map((g) => [g.reason, g.entries]).sort()).toEqual([["conflict", 1], ["invalid", 1]]);
    const missing = groups[0]!;
    const members = all.filter((e) => e.reason === "account_missing");
    expect(missing).toMatchObject({ handler: HANDLER, status: "held", key: groupKeyOfEntry(members[0]!) });
    expect(missing.firstSeen.getTime()).toBe(Math.min(...members.map((e) => e.firstSeen.getTime())));
    expect(missing.lastSeen.getTime()).toBe(Math.max(...members.map((e) => e.lastSeen.getTime())));
    expect(missing.example).toMatch(/^account "acc-m-\d" of tenant t\d was never opened$/);
    expect(ids(await list({ group: missing.key }))).toEqual(["m-1", "m-2", "m-3", "m-4", "m-5"]);
    expect(ids(await list({ group: missing.key, tenant: "t2" }))).toEqual(["m-4", "m-5"]);
    expect(ids(await list({ group: missing.key, limit: 2 }))).toEqual(["m-1", "m-2"]);
    expect(await list({ group: "0000000000000000" })).toEqual([]);
    expect((await quarantineGroups(f.ops, { tenant: "t2" })).map((g) => [g.key, g.entries])).toEqual([[missing.key, 2]]);
    expect((await quarantineGroups(f.ops, { group: groups[1]!.key })).map((g) => g.entries)).toEqual([2]);
    expect(await quarantineGroups(f.ops, { status: "discarded" })).toEqual([]);
  });

  it("bulk discard: a dry run changes nothing; the run discards the selection, each with its audit record", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const { all } = await quarantined(f, queue);
    const [overLimit] = await quarantineGroups(f.ops, { reason: "over_limit" });

    const dry = await bulkDiscard(f.ops, { filter: { group: overLimit!.key }, actor: "ops-carol", reason: "limit raised, events obsolete", dryRun: true });
    expect(dry).toEqual({ dryRun: true, selected: 2, byReason: { over_limit: 2 }, done: 2, skipped: [], failed: [], resumed: 0, unconfirmed: 0, stopped: null } satisfies BulkResult);
    expect(await f.ops.listQuarantineEntries({ status: "discarded" })).toEqual([]);

    const run = await bulkDiscard(f.ops, { filter: { group: overLimit!.key }, actor: "ops-carol", reason: "limit raised, events obsolete" });
    expect(run).toMatchObject({ dryRun: false, selected: 2, done: 2, skipped: [], failed: [] });
    const discarded = await f.ops.listQuarantineEntries({ status: "discarded" });
    expect(ids(discarded)).toEqual(["l-1", "l-2"]);
    for (const entry of discarded) {
      expect(await f.ops.quarantineAudit(entry.id)).toEqual([expect.objectContaining({ action: "discard", actor: "ops-carol", reason: "limit raised, events obsolete" })]);
    }
    // Nothing else was touched, and a second run finds nothing.
    expect(await f.ops.listQuarantineEntries({ limit: 1000 })).toHaveLength(all.length - 2);
    expect(await bulkDiscard(f.ops, { filter: { group: overLimit!.key }, actor: "ops-carol", reason: "again" })).toMatchObject({ selected: 0, done: 0 });
    await expect(bulkDiscard(f.ops, { filter: { reason: "invalid" }, actor: "ops-carol", reason: " " })).rejects.toThrow(/needs a reason/);
    await expect(bulkDiscard(f.ops, { filter: { status: "replayed" }, actor: "ops-carol", reason: "x" })).rejects.toThrow(/held entries only/);
    expect(await f.ops.listQuarantineEntries({ status: "discarded" })).toHaveLength(2);
  });

  it("bulk replay: dry run by reason; conflicts skipped without acceptNew and replayed with it; a second run publishes nothing", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const { byEvent } = await quarantined(f, queue);
    const filter = {};
    const options = { filter, actor: "ops-dan", reason: "accounts opened by support" };

    const dry = await bulkReplay(f.ops, publisher.publish, { ...options, dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, selected: 9, byReason: { account_missing: 5, conflict: 1, invalid: 1, over_limit: 2 }, done: 8, failed: [], resumed: 0 });
    expect(dry.skipped).toEqual([{ id: byEvent("c-1").id, why: expect.stringMatching(/^a conflict: .*accept-new/) as string }]);
    expect(await drainQueue(queue)).toEqual([]);
    expect(await f.ops.listQuarantineEntries({ status: "replayed" })).toEqual([]);

    const run = await bulkReplay(f.ops, publisher.publish, { ...options, filter: { reason: "account_missing" } });
    expect(run).toMatchObject({ selected: 5, done: 5, skipped: [], failed: [], stopped: null });
    for (const id of ["m-1", "m-2", "m-3", "m-4", "m-5"]) {
      const [audit] = await f.ops.quarantineAudit(byEvent(id).id);
      expect(audit).toMatchObject({ action: "replay", actor: "ops-dan", reason: "accounts opened by support", failure: null });
      expect(audit!.publishedAt).not.toBeNull();
    }
    const consumed = await consume(f, queue);
    expect(consumed.eventIds.sort()).toEqual(["m-1", "m-2", "m-3", "m-4", "m-5"]);
    expect(consumed.outcomes).toEqual(["applied", "applied", "applied", "applied", "applied"]);

    const again = await bulkReplay(f.ops, publisher.publish, { ...options, filter: { reason: "account_missing" } });
    expect(again).toMatchObject({ selected: 0, done: 0, resumed: 0 });
    expect(await drainQueue(queue)).toEqual([]);

    const conflictSkipped = await bulkReplay(f.ops, publisher.publish, { ...options, filter: { reason: "conflict" } });
    expect(conflictSkipped).toMatchObject({ selected: 1, done: 0, skipped: [{ id: byEvent("c-1").id }] });
    expect(await drainQueue(queue)).toEqual([]);
    expect((await f.ops.getQuarantineEntry(byEvent("c-1").id))?.status).toBe("held");

    const accepted = await bulkReplay(f.ops, publisher.publish, { ...options, filter: { reason: "conflict" }, acceptNew: true });
    expect(accepted).toMatchObject({ selected: 1, done: 1, skipped: [] });
    expect((await f.ops.quarantineAudit(byEvent("c-1").id))[0]).toMatchObject({ options: "accept-new" });
    expect(await consume(f, queue)).toEqual({ eventIds: ["c-1"], outcomes: ["applied"] });
    expect((await f.effects()).get("c-1")).toBe(2); // the first version, then the accepted one
    expect((await f.effects()).get("m-3")).toBe(1);
  });

  it("two bulk replays at once never replay an entry twice; the rate limit spaces the republishes", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    await quarantined(f, queue);
    const options = { filter: { reason: "account_missing" }, actor: "ops-eve", reason: "twice at once", ratePerSecond: 20 };
    const started = performance.now();
    const [a, b] = await Promise.all([bulkReplay(f.ops, publisher.publish, options), bulkReplay(f.ops, publisher.publish, options)]);
    const elapsed = performance.now() - started;
    expect(a.done + b.done).toBe(5);
    expect(a.failed.concat(b.failed)).toEqual([]);
    expect(a.skipped.concat(b.skipped).every((s) => /no longer held/.test(s.why))).toBe(true);
    const messages = await drainQueue(queue);
    expect(messages).toHaveLength(5);
    // Each run at 20/s: its own republishes at least 50 ms apart (loose lower bound, no upper one).
    expect(elapsed).toBeGreaterThanOrEqual(((Math.max(a.done, b.done) - 1) * 1000) / 20 - 20);

    const paced = await retentionFixture(kind);
    const pacedQueue = await freshQueue();
    await quarantined(paced, pacedQueue);
    const t0 = performance.now();
    const r = await bulkReplay(paced.ops, publisher.publish, { ...options, ratePerSecond: 10 });
    expect(r.done).toBe(5);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(380); // 5 slots 100 ms apart: the last at >= 400 ms
  });

  it("a replay committed but never confirmed (the run was killed) is finished by the next run under its own audit record", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const { byEvent } = await quarantined(f, queue);
    const interrupted = byEvent("m-2");
    const audit = await f.ops.beginResolution(interrupted.id, { action: "replay", actor: "ops-fay", reason: "killed run" });

    // Just committed: it may be another live run's, waiting for its confirm; left alone.
    const young = await bulkReplay(f.ops, publisher.publish, { filter: { reason: "account_missing" }, actor: "ops-fay", reason: "again", dryRun: true });
    expect(young).toMatchObject({ resumed: 0, unconfirmed: 1, selected: 4, done: 4 });

    const dry = await bulkReplay(f.ops, publisher.publish, { filter: { reason: "account_missing" }, actor: "ops-fay", reason: "again", dryRun: true, resumeAfterMs: 0 });
    expect(dry).toMatchObject({ resumed: 1, unconfirmed: 0, selected: 4, done: 4 });
    expect(await drainQueue(queue)).toEqual([]);

    const run = await bulkReplay(f.ops, publisher.publish, { filter: { reason: "account_missing" }, actor: "ops-fay", reason: "again", resumeAfterMs: 0 });
    expect(run).toMatchObject({ resumed: 1, selected: 4, done: 4, failed: [] });
    const audits = await f.ops.quarantineAudit(interrupted.id);
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ id: audit.id, reason: "killed run", failure: null });
    expect(audits[0]!.publishedAt).not.toBeNull();
    const consumed = await consume(f, queue);
    expect(consumed.eventIds.sort()).toEqual(["m-1", "m-2", "m-3", "m-4", "m-5"]);
    expect(await bulkReplay(f.ops, publisher.publish, { filter: { reason: "account_missing" }, actor: "ops-fay", reason: "third" })).toMatchObject({ resumed: 0, selected: 0 });
    expect(await drainQueue(queue)).toEqual([]);
  });

  it("killed after the broker took the message but before its confirm was recorded: the next run publishes it again, and the consumer applies it once", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const { byEvent } = await quarantined(f, queue);
    const entry = byEvent("m-4");
    const audit = await f.ops.beginResolution(entry.id, { action: "replay", actor: "ops-gil", reason: "killed after the publish" });
    await publisher.publish(replayMessage(entry, audit)); // the broker has it; the run died before confirmReplay

    const run = await bulkReplay(f.ops, publisher.publish, { filter: { tenant: "t2" }, actor: "ops-gil", reason: "again", resumeAfterMs: 0 });
    expect(run).toMatchObject({ resumed: 1, selected: 1, done: 1, failed: [] });
    expect(await f.ops.quarantineAudit(entry.id)).toEqual([expect.objectContaining({ id: audit.id, failure: null, publishedAt: expect.any(Date) as Date })]);
    const consumed = await consume(f, queue);
    expect(consumed.eventIds.sort()).toEqual(["m-4", "m-4", "m-5"]);
    expect(consumed.outcomes.sort()).toEqual(["applied", "applied", "duplicate"]);
    expect((await f.effects()).get("m-4")).toBe(1);

    // The same window with an accept-new grant: the first copy spends it, the second meets the version it applied.
    const conflict = byEvent("c-1");
    const grant = await f.ops.beginResolution(conflict.id, { action: "replay", actor: "ops-gil", reason: "new wins", acceptNew: true });
    await publisher.publish(replayMessage(conflict, grant));
    expect(await bulkReplay(f.ops, publisher.publish, { filter: { reason: "conflict" }, actor: "ops-gil", reason: "again", acceptNew: true, resumeAfterMs: 0 }))
      .toMatchObject({ resumed: 1, selected: 0, failed: [] });
    const accepted = await consume(f, queue);
    expect(accepted).toEqual({ eventIds: ["c-1", "c-1"], outcomes: ["applied", "duplicate"] });
    expect((await f.effects()).get("c-1")).toBe(2); // the first version, then the accepted one: once
    expect(await drainQueue(queue)).toEqual([]);
  });
  it("killed before its confirm was recorded, but the consumer already applied the copy: the next run marks it confirmed and publishes nothing", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const { byEvent } = await quarantined(f, queue);
    const entry = byEvent("m-4");
    const audit = await f.ops.beginResolution(entry.id, { action: "replay", actor: "ops-hal", reason: "killed after the publish" });
    await publisher.publish(replayMessage(entry, audit));
    expect(await consume(f, queue)).toEqual({ eventIds: ["m-4"], outcomes: ["applied"] });

    const run = await bulkReplay(f.ops, publisher.publish, { filter: { tenant: "t2" }, actor: "ops-hal", reason: "again", resumeAfterMs: 0 });
    expect(run).toMatchObject({ resumed: 1, selected: 1, done: 1, failed: [] });
    expect(await f.ops.quarantineAudit(entry.id)).toEqual([expect.objectContaining({ id: audit.id, failure: null, publishedAt: expect.any(Date) as Date })]);
    // Only m-5, the entry still held, went out: no second copy of m-4.
    const consumed = await consume(f, queue);
    expect(consumed).toEqual({ eventIds: ["m-5"], outcomes: ["applied"] });
    expect((await f.effects()).get("m-4")).toBe(1);
  });

  it("failed republishes put entries back to held with the failure audited, and stop the run; an aborted run stops after the entries in hand", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const { all } = await quarantined(f, queue);
    await deleteQueues(queue); // every republish is now returned unroutable

    const failed = await bulkReplay(f.ops, publisher.publish, { filter: { reason: "account_missing" }, actor: "ops-hal", reason: "queue gone", maxConsecutiveFailures: 3 });
    expect(failed).toMatchObject({ selected: 3, done: 0, skipped: [] });
    expect(failed.failed).toHaveLength(3);
    expect(failed.failed[0]!.error).toMatch(/unroutable/);
    expect(failed.stopped).toMatch(/^3 republishes failed in a row \(last: .*unroutable/);
    expect(await f.ops.listQuarantineEntries({ status: "replayed" })).toEqual([]);
    const tried = failed.failed.map((x) => x.id);
    for (const id of tried) {
      expect(await f.ops.quarantineAudit(id)).toEqual([expect.objectContaining({ action: "replay", publishedAt: null, failure: expect.stringMatching(/unroutable/) as string })]);
    }
    // Not one of the entries after the third was touched.
    const untouched = all.filter((e) => e.reason === "account_missing" && !tried.includes(e.id));
    for (const e of untouched) expect(await f.ops.quarantineAudit(e.id)).toEqual([]);

    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    const controller = new AbortController();
    const aborted = await bulkReplay(f.ops, publisher.publish, {
      filter: { reason: "account_missing" }, actor: "ops-hal", reason: "queue back", ratePerSecond: 5, signal: controller.signal,
      onProgress: (p) => { if (p.done === 2) controller.abort(); },
    });
    expect(aborted).toMatchObject({ done: 2, failed: [], stopped: "aborted" });
    expect(await f.ops.listQuarantineEntries({ status: "replayed" })).toHaveLength(2);
    expect(await f.ops.listQuarantineEntries({ reason: "account_missing" })).toHaveLength(3);
    expect(await drainQueue(queue)).toHaveLength(2);
  });
  it("a database that fails mid-run stops the run and says so; what was done stays done", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    await quarantined(f, queue);
    let closing: Promise<void> | undefined;
    const result = await bulkReplay(f.ops, publisher.publish, {
      filter: { reason: "account_missing" }, actor: "ops-ida", reason: "database goes away", ratePerSecond: 4,
      onProgress: (p) => { if (p.done === 1 && !closing) closing = f.store.close(); },
    });
    await closing;
    expect(result.done).toBe(1);
    expect(result.stopped).toMatch(/^the database failed: /);
    expect(result.failed).toHaveLength(1);
    expect((await drainQueue(queue)).map((m) => (JSON.parse(m.content.toString()) as { event_id: string }).event_id)).toEqual(["m-1"]);
    // Failing while reading the selection: a result that says so, not an exception that loses it.
    const discard = await bulkDiscard(f.ops, { filter: {}, actor: "ops-ida", reason: "database gone" });
    expect(discard).toMatchObject({ selected: 0, done: 0, stopped: expect.stringMatching(/^the database failed: /) as string });
    const replay = await bulkReplay(f.ops, publisher.publish, { filter: {}, actor: "ops-ida", reason: "database gone", resumeAfterMs: 0 });
    expect(replay).toMatchObject({ selected: 0, done: 0, stopped: expect.stringMatching(/^the database failed: /) as string });
  });
  it("stale entries are skipped without acceptStale and replayed past the fence with it", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const pipeline = f.pipeline();
    const past = new Date(Date.now() - 60_000);
    await pipeline.process([delivery(event("s-0"), { queue, timestamp: past })]);
    await sleep(5);
    await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, force: true });
    const [stale] = await pipeline.process([delivery(event("s-1", { n: 1 }), { queue, timestamp: past })]);
    expect(stale).toMatchObject({ kind: "quarantined", reason: "stale" });
    const [entry] = await f.ops.listQuarantineEntries();
    const options = { filter: { reason: "stale" }, actor: "ops-jo", reason: "checked: never applied" };

    const skipped = await bulkReplay(f.ops, publisher.publish, options);
    expect(skipped).toMatchObject({ selected: 1, done: 0, skipped: [{ id: entry!.id, why: expect.stringMatching(/^stale: .*accept-stale/) as string }] });
    expect(await drainQueue(queue)).toEqual([]);

    const accepted = await bulkReplay(f.ops, publisher.publish, { ...options, acceptStale: true, acceptNew: true });
    expect(accepted).toMatchObject({ selected: 1, done: 1, skipped: [] });
    expect(await f.ops.quarantineAudit(entry!.id)).toEqual([expect.objectContaining({ options: "accept-stale" })]);
    expect(await consume(f, queue)).toEqual({ eventIds: ["s-1"], outcomes: ["applied"] });
    expect((await f.effects()).get("s-1")).toBe(1);
  });
});
