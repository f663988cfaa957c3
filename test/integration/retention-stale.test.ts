/**
 * The stale fence and the purge horizon against real PostgreSQL, MariaDB and SQLite: a purged event
 * that comes back is quarantined as `stale` instead of applied a second time, a claim racing a
 * purge sees the purge's horizon, cleanup's guards hold, and the operator's one-time grants
 * (accept-stale, accept-new) let exactly one version through.
 */
import mysql from "mysql2/promise";
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { Outcome } from "../../src/core/outcome.js";
import { RetentionGuardError, purgeExpiredDedupRecords } from "../../src/operations.js";
import type { MysqlStore } from "../../src/store/mysql/index.js";
import { pgUrl } from "../support/databases.js";
import { HANDLER, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES } from "../support/test-databases.js";

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const reasons = (outcomes: Outcome[]) => outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));

describe.each(TEST_DATABASES)("stale fence on %s", (kind) => {
  it("a purge, then a redelivery of a purged event: quarantined as stale, not applied; an event stamped after the horizon applies", async () => {
    const f = await retentionFixture(kind);
    const pipeline = f.pipeline();
    const past = new Date(Date.now() - 60_000);
    expect(reasons(await pipeline.process([delivery(event("e-1", { n: 1 }), { timestamp: past }), delivery(event("e-2", { n: 2 }))]))).toEqual(["applied", "applied"]);
    const newestFirstSeen = (await f.rows(`SELECT max(first_seen) AS m FROM rabbit_inbox_dedup`))[0]!.m;

    await sleep(5); // "--older-than 0s" purges what was first seen strictly before now
    const report = await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, force: true });
    expect(report.purged).toBe(2);
    expect(report.horizons).toHaveLength(1);
    const horizon = report.horizons[0]!;
    expect(horizon.handler).toBe(HANDLER);
    // The horizon is the newest first_seen purged, not the cutoff.
    expect(horizon.purgedThrough.getTime()).toBe(kind === "sqlite" ? Number(newestFirstSeen) : (newestFirstSeen as Date).getTime());
    expect((await f.ops.purgeHorizons()).map((h) => [h.handler, h.purgedThrough.getTime(), h.rowsPurged])).toEqual([[HANDLER, horizon.purgedThrough.getTime(), 2]]);
    expect(await f.dedup()).toEqual(new Map());

    // The broker redelivers e-1 (a dead-letter replay, a backlog): its record is gone.
    const [again] = await pipeline.process([delivery(event("e-1", { n: 1 }), { timestamp: past })]);
    expect(again).toMatchObject({ kind: "quarantined", reason: "stale" });
    expect((await f.effects()).get("e-1")).toBe(1);
    expect((await f.dedup()).has("e-1")).toBe(false); // nothing kept: a granted replay can still claim it
    const [entry] = await f.ops.listQuarantineEntries();
    expect(entry).toMatchObject({ reason: "stale", status: "held", tenant: "t1", eventId: "e-1" });
    expect(entry!.eventTime?.getTime()).toBe(Math.floor(past.getTime() / 1000) * 1000);
    expect(f.logs.some((l) => l.level === "warn" && l.msg.startsWith("stale event") && l.fields.eventId === "e-1")).toBe(true);

    // Stamped after the horizon: a new event, applied.
    const later = new Date(horizon.purgedThrough.getTime() + 2000);
    expect(reasons(await pipeline.process([delivery(event("e-3", { n: 3 }), { timestamp: later })]))).toEqual(["applied"]);
    expect(await f.effects()).toEqual(new Map([["e-1", 1], ["e-2", 1], ["e-3", 1]]));
  });

  it("in one batch: both copies of a stale event are stale, fresh events and duplicates are unaffected", async () => {
    const f = await retentionFixture(kind);
    const pipeline = f.pipeline();
    const past = new Date(Date.now() - 60_000);
    await pipeline.process([delivery(event("old"), { timestamp: past })]);
    await sleep(5);
    await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, force: true });
    await pipeline.process([delivery(event("kept"), { timestamp: new Date(Date.now() + 5000) })]);
    const outcomes = await pipeline.process([
      delivery(event("old"), { timestamp: past }),
      delivery(event("new"), { timestamp: new Date(Date.now() + 5000) }),
      delivery(event("old"), { timestamp: past }),
      delivery(event("kept"), { timestamp: past }), // in the dedup table: a duplicate, whatever its time
      delivery(event("untimed")),
    ]);
    expect(reasons(outcomes)).toEqual(["quarantined:stale", "applied", "quarantined:stale", "duplicate", "applied"]);
    expect(await f.effects()).toEqual(new Map([["old", 1], ["kept", 1], ["new", 1], ["untimed", 1]]));
  });

  it("cleanup removes the redelivery counts (poison detection) last touched before its cutoff", async () => {
    const f = await retentionFixture(kind);
    const store = f.store as { transaction<T>(work: (tx: { countRedelivery?(handler: string, key: { tenant: string; eventId: string }): Promise<number> }) => Promise<T>): Promise<T> };
    const count = (eventId: string) => store.transaction((tx) => tx.countRedelivery!(HANDLER, { tenant: "t1", eventId }));
    expect([await count("r-1"), await count("r-1"), await count("r-2")]).toEqual([1, 2, 1]);
    expect((await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 3_600_000, minimumWindowMs: 0 })).redeliveryCountsPurged).toBe(0);
    await sleep(5);
    const dry = await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, force: true, dryRun: true });
    expect(dry.redeliveryCountsPurged).toBe(0);
    expect(await f.rows("SELECT event_id FROM rabbit_inbox_redelivery")).toHaveLength(2);
    const report = await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, force: true });
    expect(report.redeliveryCountsPurged).toBe(2);
    expect(await f.rows("SELECT event_id FROM rabbit_inbox_redelivery")).toHaveLength(0);
    expect(await count("r-1")).toBe(1);
  });

  it("a body field can carry the event time; an unreadable one is invalid", async () => {
    const f = await retentionFixture(kind);
    const pipeline = f.pipeline({ staleFence: { eventTimeField: "occurred_at" } });
    const past = new Date(Date.now() - 60_000).toISOString();
    await pipeline.process([delivery(event("b-1", { occurred_at: past }))]);
    await sleep(5);
    await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, force: true });
    const outcomes = await pipeline.process([
      delivery(event("b-1", { occurred_at: past })),
      delivery(event("b-2", { occurred_at: new Date(Date.now() + 5000).toISOString() })),
      delivery(event("b-3", { occurred_at: "yesterday" })),
    ]);
    expect(reasons(outcomes)).toEqual(["quarantined:stale", "applied", "quarantined:invalid"]);
  });

  it("accept-stale: the operator's grant lets exactly that version through, once", async () => {
    const f = await retentionFixture(kind);
    const pipeline = f.pipeline();
    const past = new Date(Date.now() - 60_000);
    await purgeAfter(f, pipeline, [delivery(event("s-0"), { timestamp: past })]);
    const [stale] = await pipeline.process([delivery(event("s-1", { n: 1 }), { timestamp: past })]);
    expect(stale).toMatchObject({ kind: "quarantined", reason: "stale" });
    const [entry] = await f.ops.listQuarantineEntries();

    // Another version of the same event id is not covered by the grant.
    await f.ops.beginResolution(entry!.id, { action: "replay", actor: "test", reason: "checked: never applied", acceptStale: true });
    expect(reasons(await pipeline.process([delivery(event("s-1", { n: 99 }), { timestamp: past })]))).toEqual(["quarantined:stale"]);
    expect(reasons(await pipeline.process([delivery(event("s-1", { n: 1 }), { timestamp: past })]))).toEqual(["applied"]);
    expect(reasons(await pipeline.process([delivery(event("s-1", { n: 1 }), { timestamp: past })]))).toEqual(["duplicate"]);
    expect((await f.effects()).get("s-1")).toBe(1);
    const grants = await f.rows("SELECT kind, used_at FROM rabbit_inbox_replay_grant");
    expect(grants).toHaveLength(1);
    expect(grants[0]!.used_at).not.toBeNull();
  });

  it("accept-new: the replayed version replaces the stored fingerprint and applies, in one transaction; the old version then conflicts", async () => {
    const f = await retentionFixture(kind);
    const pipeline = f.pipeline();
    expect(reasons(await pipeline.process([delivery(event("c-1", { n: 100 }))]))).toEqual(["applied"]);
    const storedBefore = (await f.dedup()).get("c-1");
    expect(reasons(await pipeline.process([delivery(event("c-1", { n: 150 }))]))).toEqual(["quarantined:conflict"]);
    const [conflict] = await f.ops.listQuarantineEntries({ reason: "conflict" });
    expect(conflict!.storedFingerprint).toBe(storedBefore);

    // Without a grant a replayed conflict still conflicts.
    expect(reasons(await pipeline.process([delivery(event("c-1", { n: 150 }))]))).toEqual(["quarantined:conflict"]);
    await f.ops.beginResolution(conflict!.id, { action: "replay", actor: "test", reason: "the producer corrected the amount", acceptNew: true });
    expect(reasons(await pipeline.process([delivery(event("c-1", { n: 150 }))]))).toEqual(["applied"]);
    expect((await f.dedup()).get("c-1")).toBe(conflict!.fingerprint);
    expect(reasons(await pipeline.process([delivery(event("c-1", { n: 150 }))]))).toEqual(["duplicate"]);
    expect(reasons(await pipeline.process([delivery(event("c-1", { n: 100 }))]))).toEqual(["quarantined:conflict"]);
    expect((await f.effects()).get("c-1")).toBe(2); // the first version, then the accepted one
  });

  it("cleanup guards: no window under the minimum without force; a held entry stops the purge short; a discarded one does not", async () => {
    const f = await retentionFixture(kind);
    const pipeline = f.pipeline();
    await expect(purgeExpiredDedupRecords(f.ops, { replayWindowMs: 3_600_000 })).rejects.toBeInstanceOf(RetentionGuardError);

    await pipeline.process([delivery(event("h-1"))]);
    await sleep(20);
    await pipeline.process([delivery(event("h-2"))]);
    await sleep(20);
    // A conflict held in quarantine: the stored record of h-2 is what its replay will meet.
    await pipeline.process([delivery(event("h-2", { n: 2 }))]);
    await sleep(20);
    await pipeline.process([delivery(event("h-3"))]);
    const [held] = await f.ops.listQuarantineEntries();
    const hold = await f.ops.quarantineHold();
    expect(hold?.quarantineId).toBe(held!.id);

    const dry = await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, minimumWindowMs: 0, dryRun: true });
    expect(dry.limitedBy?.quarantineId).toBe(held!.id);
    expect(dry.purgeable?.records).toBe(1); // h-1 only: h-2 is the conflict's stored version, h-3 is newer
    expect((await f.dedup()).size).toBe(3);

    const limited = await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, minimumWindowMs: 0 });
    expect(limited.purged).toBe(1);
    expect([...(await f.dedup()).keys()].sort()).toEqual(["h-2", "h-3"]);
    expect(reasons(await pipeline.process([delivery(event("h-2", { n: 2 }))]))).toEqual(["quarantined:conflict"]);

    await f.ops.beginResolution(held!.id, { action: "discard", actor: "test", reason: "the producer's bug, compensated by hand" });
    expect(await f.ops.quarantineHold()).toBeNull();
    const rest = await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, minimumWindowMs: 0 });
    expect(rest.limitedBy).toBeNull();
    expect(rest.purged).toBe(2);
  });

  it("purges in batches of batchSize, oldest first, each advancing the horizon", async () => {
    const f = await retentionFixture(kind);
    const pipeline = f.pipeline();
    for (let i = 0; i < 25; i++) await pipeline.process([delivery(event(`p-${String(i).padStart(2, "0")}`))]);
    await sleep(5);
    const batches: number[] = [];
    const report = await purgeExpiredDedupRecords(f.ops, {
      replayWindowMs: 0, force: true, batchSize: 10, pauseMs: 0, onBatch: (b) => batches.push(b.deleted),
    });
    expect(batches).toEqual([10, 10, 5]);
    expect(report).toMatchObject({ purged: 25, batches: 3 });
    const [h] = await f.ops.purgeHorizons();
    expect(h!.rowsPurged).toBe(25);

    const stopped = await retentionFixture(kind);
    const p2 = stopped.pipeline();
    for (let i = 0; i < 12; i++) await p2.process([delivery(event(`q-${String(i).padStart(2, "0")}`))]);
    const firstSeen = (await stopped.rows("SELECT first_seen FROM rabbit_inbox_dedup ORDER BY first_seen")).map((r) => r.first_seen);
    const partial = await purgeExpiredDedupRecords(stopped.ops, { replayWindowMs: 0, force: true, batchSize: 5, pauseMs: 0, maxBatches: 1 });
    expect(partial).toMatchObject({ purged: 5, batches: 1, incomplete: true });
    // Oldest first, and the horizon stops at the newest row deleted so far.
    const expected = kind === "sqlite" ? Number(firstSeen[4]) : (firstSeen[4] as Date).getTime();
    expect(partial.horizons[0]!.purgedThrough.getTime()).toBe(expected);
    expect((await stopped.dedup()).size).toBe(7);
  });
});

describe("stale fence on postgres: a claim racing a purge", () => {
  it("a claim that waited for an in-flight purge of its key reads the purge's horizon, not the one before", async () => {
    const f = await retentionFixture("postgres");
    const pipeline = f.pipeline();
    const past = new Date(Date.now() - 60_000);
    await pipeline.process([delivery(event("r-1", { n: 1 }), { timestamp: past })]);

    // A purge batch, held open: the row is deleted and the horizon moved, not yet committed.
    const purge = new pg.Client({ connectionString: f.url });
    await purge.connect();
    try {
      await purge.query("BEGIN");
      await purge.query("DELETE FROM rabbit_inbox_dedup WHERE event_id = 'r-1'");
      await purge.query("INSERT INTO rabbit_inbox_purge_horizon (handler, purged_through, rows_purged) VALUES ($1, now(), 1)", [HANDLER]);

      let settled = false;
      const redelivery = pipeline.process([delivery(event("r-1", { n: 1 }), { timestamp: past })]).finally(() => { settled = true; });
      // The claim's INSERT meets the row being deleted and waits for the purge's transaction.
      const admin = new pg.Client({ connectionString: pgUrl });
      await admin.connect();
      try {
        for (let i = 0; ; i++) {
          const { rows } = await admin.query("SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted");
          if (rows[0].n > 0) break;
          if (i > 200) throw new Error("the claim never waited for the purge");
          await sleep(25);
        }
      } finally {
        await admin.end();
      }
      expect(settled).toBe(false);
      await purge.query("COMMIT");
      const [outcome] = await redelivery;
      expect(outcome).toMatchObject({ kind: "quarantined", reason: "stale" });
    } finally {
      await purge.end();
    }
    expect((await f.effects()).get("r-1")).toBe(1);
    expect(await f.dedup()).toEqual(new Map());
  });
});

describe("stale fence on mysql: a claim racing a purge", () => {
  /** A purge batch on its own connection, held open: the row is deleted and the horizon moved, not yet committed. */
  async function openPurge(url: string, eventId: string): Promise<mysql.Connection> {
    const purge = await mysql.createConnection(url);
    await purge.query("START TRANSACTION");
    await purge.execute("DELETE FROM rabbit_inbox_dedup WHERE event_id = ?", [eventId]);
    await purge.execute("INSERT INTO rabbit_inbox_purge_horizon (handler, purged_through, rows_purged) VALUES (?, UTC_TIMESTAMP(6), 1)", [HANDLER]);
    return purge;
  }

  /** Waits until some session waits for a row lock (MariaDB refreshes INNODB_TRX at most every 100 ms). */
  async function waitForLockWait(url: string): Promise<void> {
    const admin = await mysql.createConnection(url);
    try {
      for (let i = 0; ; i++) {
        await sleep(150);
        const [rows] = await admin.query("SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'");
        if (Number((rows as Array<{ n: number }>)[0]!.n) > 0) return;
        if (i > 60) throw new Error("the claim never waited for the purge");
      }
    } finally {
      await admin.end();
    }
  }

  it("a redelivery whose claim waited for an in-flight purge of its key is stale", async () => {
    const f = await retentionFixture("mysql");
    const pipeline = f.pipeline();
    const past = new Date(Date.now() - 60_000);
    await pipeline.process([delivery(event("r-1", { n: 1 }), { timestamp: past })]);
    const purge = await openPurge(f.url, "r-1");
    try {
      let settled = false;
      const redelivery = pipeline.process([delivery(event("r-1", { n: 1 }), { timestamp: past })]).finally(() => { settled = true; });
      await waitForLockWait(f.url);
      expect(settled).toBe(false);
      await purge.query("COMMIT");
      const [outcome] = await redelivery;
      expect(outcome).toMatchObject({ kind: "quarantined", reason: "stale" });
    } finally {
      await purge.end();
    }
    expect((await f.effects()).get("r-1")).toBe(1);
    expect(await f.dedup()).toEqual(new Map());
  });

  it("the horizon is read with a locking read: a REPEATABLE READ snapshot taken before the purge committed does not hide it", async () => {
    const f = await retentionFixture("mysql");
    const past = new Date(Date.now() - 60_000);
    await f.pipeline().process([delivery(event("r-2", { n: 1 }), { timestamp: past })]);
    const [stored] = (await f.rows("SELECT fingerprint FROM rabbit_inbox_dedup WHERE event_id = 'r-2'")).map((r) => String(r.fingerprint));
    const purge = await openPurge(f.url, "r-2");
    const store = f.store as MysqlStore;
    try {
      const claim = store.transaction(async (tx) => {
        // A consistent read first: under REPEATABLE READ it fixes the snapshot, before the purge commits.
        await tx.handle.query("SELECT COUNT(*) AS n FROM rabbit_inbox_purge_horizon");
        return tx.claim(HANDLER, [{ key: { tenant: "t1", eventId: "r-2" }, fingerprint: stored!, eventTime: past }]);
      });
      await waitForLockWait(f.url);
      await purge.query("COMMIT");
      expect(await claim).toEqual([{ status: "stale", horizon: expect.any(Date) as Date }]);
    } finally {
      await purge.end();
    }
    expect(await f.dedup()).toEqual(new Map());
  });
});

async function purgeAfter(f: Awaited<ReturnType<typeof retentionFixture>>, pipeline: ReturnType<Awaited<ReturnType<typeof retentionFixture>>["pipeline"]>, messages: Parameters<typeof pipeline.process>[0]): Promise<void> {
  await pipeline.process(messages);
  await sleep(5);
  await purgeExpiredDedupRecords(f.ops, { replayWindowMs: 0, force: true });
}
