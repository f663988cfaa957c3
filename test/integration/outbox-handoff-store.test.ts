import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OutboxRecord } from "../../src/core/store-contract/store.js";
import type { HandedOffRow } from "../../src/core/store-contract/outbox-signal.js";
import type { OutboxClaim } from "../../src/core/store-contract/outbox-relay-store.js";
import { type OutboxTestDatabase, type OutboxTestStore, claimWhenWhole, createOutboxDatabase, idTable } from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

function record(messageId: string, orderingKey: string | null, body = messageId): OutboxRecord {
  return { messageId, exchange: "x", routingKey: "rk", body: Buffer.from(body), properties: "{}", orderingKey, source: null };
}

/** A handoff as a relay attaches it, recording what each commit hands over. */
interface RecordingHandoff {
  taken: Array<{ rows: readonly HandedOffRow[]; leasedAt: number }>;
  detach: () => void;
}

const messageIds = (rows: ReadonlyArray<{ messageId: string }>) => rows.map((r) => r.messageId);

/**
 * What each store does for the relay that takes rows from memory: `writeLeased` (through a
 * transaction's writeOutbox while a handoff is attached) and `settleHandedOff`, checked against
 * the claims of other relays and the table itself.
 */
describe.each(TEST_DATABASES)("rows handed to a relay in memory: the store's side on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: OutboxTestStore;
  const cleanups: Array<() => Promise<unknown> | void> = [];

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await store.close();
    await db.remove();
  });

  function attach(leaseMs = 60_000): RecordingHandoff {
    const taken: RecordingHandoff["taken"] = [];
    const detach = store.outboxSignal.attach({ leaseMs, take: (rows, leasedAt) => { taken.push({ rows, leasedAt }); } });
    cleanups.push(detach);
    return { taken, detach };
  }

  async function write(...writes: OutboxRecord[][]): Promise<void> {
    await store.transaction(async (tx) => {
      for (const records of writes) await tx.writeOutbox!(records);
    });
  }

  /** A claim of another relay ("other"), settled at the end of the test if the test did not. */
  async function claim(): Promise<OutboxClaim | null> {
    const held = await store.claimOutbox({ limit: 100, relayId: "other", leaseMs: 60_000 });
    let settled = false;
    if (held) cleanups.push(() => (settled ? undefined : held.settle({ sent: [], failed: [] })));
    return held && { ...held, settle: (s) => { settled = true; return held.settle(s); } };
  }

  const idOf = async (messageId: string) => (await db.rows()).find((r) => r.message_id === messageId)!.id;

  it("a handoff that throws on take leaves the commit standing: the transaction resolves, its rows stay leased for a claim", async () => {
    cleanups.push(store.outboxSignal.attach({ leaseMs: 60_000, take: () => { throw new Error("a bug in the relay's queue"); } }));
    await expect(store.transaction(async (tx) => { await tx.writeOutbox!([record("t1", "t")]); return "done"; })).resolves.toBe("done");
    expect((await db.rows()).map((r) => [r.message_id, r.sent])).toEqual([["t1", false]]);
    // Leased, not due: no claim takes it before the lease ends (then a relay's claim does).
    expect(await claim()).toBeNull();
  });

  it("writes rows no claim takes, hands them over after the commit only, each with its key's newest row unsent before the write", async () => {
    // Before the handoff: a2 waits (due) in key a behind a sent a1; b1, key b's only row, is sent.
    await write([record("a1", "a"), record("a2", "a"), record("b1", "b")]);
    const first = await claim();
    expect(messageIds(first!.rows)).toEqual(["a1", "a2", "b1"]);
    await first!.settle({ sent: [first!.rows[0]!.id, first!.rows[2]!.id], failed: [] });
    const a2 = await idOf("a2");

    const { taken } = attach();
    const before = Date.now();
    await store.transaction(async (tx) => {
      await tx.writeOutbox!([record("a3", "a"), record("b2", "b"), record("n1", null), record("a4", "a")]);
      await tx.writeOutbox!([record("a5", "a")]);
      // Nothing leaves the process before the commit.
      expect(taken).toEqual([]);
    });
    expect(taken).toHaveLength(1);
    const [handoff] = taken;
    expect(handoff!.leasedAt).toBeGreaterThanOrEqual(before);
    expect(handoff!.leasedAt).toBeLessThanOrEqual(Date.now());
    const rows = handoff!.rows;
    expect(rows.map((r) => r.record.messageId)).toEqual(["a3", "b2", "n1", "a4", "a5"]);
    const ids = rows.map((r) => r.id);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(ids).toEqual(await Promise.all(["a3", "b2", "n1", "a4", "a5"].map(idOf)));
    // a3 and a4 follow a2 (the rows of their own write left out); a5 follows a4, written earlier in its transaction.
    expect(rows.map((r) => r.previousUnsent)).toEqual([a2, null, null, a2, ids[3]]);
    expect(rows[0]!.record).toEqual(record("a3", "a"));

    // Another relay's claim takes a2, the head of key a, and none of the leased rows behind it.
    const second = await claim();
    expect(messageIds(second!.rows)).toEqual(["a2"]);
    await second!.settle({ sent: [second!.rows[0]!.id], failed: [] });
    expect(await claim()).toBeNull();
    expect((await db.rows()).filter((r) => !r.sent).map((r) => r.message_id)).toEqual(["a3", "b2", "n1", "a4", "a5"]);

    // A transaction that rolls back hands nothing over.
    await expect(store.transaction(async (tx) => {
      await tx.writeOutbox!([record("r1", "a")]);
      throw new Error("rolled back");
    })).rejects.toThrow("rolled back");
    expect(taken).toHaveLength(1);
    expect((await db.rows()).map((r) => r.message_id)).not.toContain("r1");
  });

  it("a message id already in the outbox, or twice in one write, is written once and handed over only where it was new", async () => {
    await write([record("m1", "k", "first m1")]);
    const { taken } = attach();
    // 70 records: more than one statement's chunk on MySQL, with the duplicates in the first.
    const many = Array.from({ length: 66 }, (_, i) => record(`n${i}`, i % 2 === 0 ? "k" : null));
    await write([record("m1", "k", "second m1"), record("m2", "k", "first m2"), record("m2", "k", "second m2"), record("m3", null), ...many]);
    const rows = taken[0]!.rows;
    expect(rows.map((r) => r.record.messageId)).toEqual(["m2", "m3", ...many.map((r) => r.messageId)]);
    expect(rows[0]!.record.body.toString()).toBe("first m2");
    expect(rows.map((r) => r.id)).toEqual(await Promise.all(rows.map((r) => idOf(r.record.messageId))));
    const m1 = await idOf("m1");
    expect(rows.filter((r) => r.record.orderingKey === "k").every((r) => r.previousUnsent === m1)).toBe(true);
    // What the table holds is what was written first, and what the relay would publish from memory.
    expect((await db.rows()).map((r) => r.message_id)).toEqual(["m1", "m2", "m3", ...many.map((r) => r.messageId)]);
    await store.settleHandedOff({ sent: [], failed: [], due: [rows[0]!.id] });
    const claimed = await claim();
    expect(claimed!.rows.map((r) => [r.messageId, r.body.toString()])).toEqual([["m1", "first m1"], ["m2", "first m2"]]);
    // Nothing new: nothing handed over.
    await write([record("m1", "k"), record("m3", null)]);
    expect(taken).toHaveLength(1);
  });

  it("a write that meets a message id already there undoes only itself: the transaction's claim, business row and other rows commit", async () => {
    const accounts = idTable(db, store, "accounts");
    await accounts.create();
    await write([record("m1", "k", "first m1")]);
    const { taken } = attach();
    const claimed = await store.transaction(async (tx) => {
      const results = await tx.claim("h", [{ key: { tenant: "t", eventId: "e1" }, fingerprint: "f1" }]);
      await accounts.insert(tx.handle, "a1");
      await tx.writeOutbox!([record("m2", "k"), record("m1", "k", "second m1"), record("m3", null)]);
      // A second write of the same transaction, after the first met a conflict.
      await tx.writeOutbox!([record("m4", "k"), record("m2", "k", "second m2")]);
      return results;
    });
    expect(claimed).toEqual([{ status: "claimed" }]);
    expect(await accounts.list()).toEqual(["a1"]);
    expect(await store.countInbox("h")).toBe(1);
    expect(taken.flatMap((t) => t.rows.map((r) => r.record.messageId))).toEqual(["m2", "m3", "m4"]);
    expect((await db.rows()).map((r) => r.message_id)).toEqual(["m1", "m2", "m3", "m4"]);
    const m2 = await idOf("m2");
    // m4 follows m2 of the same transaction, m2 follows m1 (unsent before it).
    expect(taken.flatMap((t) => t.rows.map((r) => [r.record.messageId, r.previousUnsent]))).toEqual([["m2", await idOf("m1")], ["m3", null], ["m4", m2]]);
  });

  it("settles sent, failed and due rows, and leaves alone rows another relay's claim holds and rows already sent", async () => {
    attach();
    await write([record("s1", "a"), record("s2", null), record("f1", "b"), record("d1", "c"), record("h1", null), record("x1", null)]);
    const id = Object.fromEntries(await Promise.all(["s1", "s2", "f1", "d1", "h1", "x1"].map(async (m) => [m, await idOf(m)] as const)));
    // h1's lease ended and another relay claimed it; x1 was sent by a relay after its lease ended.
    await db.exec(`UPDATE rabbit_inbox_outbox SET available_at = created_at WHERE id = ${id.h1!}`);
    await db.exec(`UPDATE rabbit_inbox_outbox SET sent_at = created_at, attempts = 1 WHERE id = ${id.x1!}`);
    const other = await claim();
    expect(messageIds(other!.rows)).toEqual(["h1"]);

    // Waiting for the other relay's claim would never end here: it is settled only afterwards.
    await store.settleHandedOff({
      sent: [id.s1!, id.s2!, id.h1!], failed: [{ id: id.f1!, error: "nack", retryDelayMs: 60_000 }], due: [id.d1!, id.x1!],
    });
    const byMessageId = new Map((await db.rows()).map((r) => [r.message_id, r]));
    expect(byMessageId.get("s1")).toMatchObject({ sent: true, attempts: 1, last_error: null });
    expect(byMessageId.get("s2")).toMatchObject({ sent: true, attempts: 1 });
    expect(byMessageId.get("f1")).toMatchObject({ sent: false, attempts: 1, last_error: "nack" });
    expect(byMessageId.get("d1")).toMatchObject({ sent: false, attempts: 0 });
    expect(byMessageId.get("h1")).toMatchObject({ sent: false, attempts: 0 });
    expect(byMessageId.get("x1")).toMatchObject({ sent: true, attempts: 1 });

    await other!.settle({ sent: [id.h1!], failed: [] });
    expect((await db.rows()).find((r) => r.message_id === "h1")).toMatchObject({ sent: true, attempts: 1 });
    // d1 is due now; f1 waits for its retry, x1 stays sent.
    const next = await claim();
    expect(messageIds(next!.rows)).toEqual(["d1"]);
    await next!.settle({ sent: [], failed: [] });
  });

  it("a row handed over and never settled (its process died) is claimed once its lease ends", async () => {
    attach(400);
    await write([record("l1", "a"), record("l2", null), record("l3", "a")]);
    expect(await claim()).toBeNull();
    // A claim that runs as the lease ends may see some rows due and not yet the others: it gives them back.
    const late = await claimWhenWhole(claim, 3, "the rows claimable once their lease ended");
    expect(messageIds(late.rows)).toEqual(["l1", "l2", "l3"]);
    await late.settle({ sent: late.rows.map((r) => r.id), failed: [] });
  });
});
