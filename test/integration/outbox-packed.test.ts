import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OutboxRecord } from "../../src/core/store-contract/store.js";
import type { HandedOffRow } from "../../src/core/store-contract/outbox-signal.js";
import type { OutboxClaim } from "../../src/core/store-contract/outbox-relay-store.js";
import type { PostgresStore } from "../../src/store/postgres/index.js";
import { type OutboxTestDatabase, claimWhenWhole, createOutboxDatabase } from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

function record(messageId: string, orderingKey: string | null, options: { body?: string; eventId?: string } = {}): OutboxRecord {
  return {
    messageId, exchange: "x", routingKey: "rk", body: Buffer.from(options.body ?? messageId), properties: "{}", orderingKey,
    source: options.eventId ? { tenant: "t", handler: "h", eventId: options.eventId } : null,
  };
}

const messageIds = (rows: ReadonlyArray<{ messageId: string }>) => rows.map((r) => r.messageId);

/**
 * Packed outbox rows (PostgreSQL): with a relay that keeps no sent rows, each transaction's rows
 * handed over in memory are ONE row of rabbit_inbox_outbox_packed. Checked here against the
 * table and against the claims of other relays: the ids, the per-key predecessors and the
 * message ids the write finds; the settlement; a claim meeting a live packed row, an expired
 * one, and one a settlement wants at the same time; a duplicate's resend; the pending counts.
 */
describe.each(TEST_DATABASES.filter((kind) => kind === "postgres"))("packed outbox rows on %s", (kind) => {
  let db: OutboxTestDatabase;
  let store: PostgresStore;
  const cleanups: Array<() => Promise<unknown> | void> = [];

  beforeEach(async () => {
    db = await createOutboxDatabase(kind);
    store = (await db.open()) as PostgresStore;
    await store.migrate();
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await store.close();
    await db.remove();
  });

  /** A packing handoff as a relay with `sentRetentionMs: 0` attaches it, recording what each commit hands over. */
  function attach(leaseMs = 60_000): HandedOffRow[][] {
    const taken: HandedOffRow[][] = [];
    cleanups.push(store.outboxSignal.attach({ leaseMs, packs: true, take: (rows) => { taken.push([...rows]); } }));
    return taken;
  }

  async function write(...writes: OutboxRecord[][]): Promise<void> {
    await store.transaction(async (tx) => {
      for (const records of writes) await tx.writeOutbox!(records);
    });
  }

  /** A claim of another relay, settled at the end of the test if the test did not. */
  async function claim(): Promise<OutboxClaim | null> {
    const held = await store.claimOutbox({ limit: 100 });
    let settled = false;
    if (held) cleanups.push(() => (settled ? undefined : held.settle({ sent: [], failed: [] })));
    return held && { ...held, settle: (s) => { settled = true; return held.settle(s); } };
  }

  const packedRows = async () => (await db.rows()).filter((r) => r.packed);
  const ownRows = async () => (await db.rows()).filter((r) => !r.packed);

  // A key as the ledger writes them (JSON), with a quote, a backslash and a non-ASCII letter in it:
  // the write returns each key's predecessor as JSON text, which must give the key back exactly.
  const QUOTED_KEY = JSON.stringify(["t\"1", "acc\\ü"]);

  it("a transaction's writes are one packed row each: ids of the outbox's sequence in write order, each with its key's newest unsent message in either table", async () => {
    // Before any handoff: a1, a row of its own, unsent (due, for the claims).
    await write([record("a1", "a")]);
    const a1 = (await ownRows())[0]!.id;
    const taken = attach();
    await store.transaction(async (tx) => {
      await tx.writeOutbox!([record("a2", "a"), record("b1", QUOTED_KEY), record("n1", null)]);
      await tx.writeOutbox!([record("a3", "a")]);
      expect(taken).toEqual([]);
    });
    await write([record("b2", QUOTED_KEY), record("a4", "a")]);
    expect(taken).toHaveLength(2);
    const [first, second] = taken as [HandedOffRow[], HandedOffRow[]];
    expect(first.map((r) => r.record.messageId)).toEqual(["a2", "b1", "n1", "a3"]);
    const ids = [...first, ...second].map((r) => r.id);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(ids[0]).toBeGreaterThan(a1);
    // One packed row per write: the transaction's two writes are two rows, the next transaction a third.
    expect(new Set(first.map((r) => r.packedIn)).size).toBe(2);
    expect(new Set(second.map((r) => r.packedIn)).size).toBe(1);
    expect(second[0]!.packedIn).not.toBe(first[3]!.packedIn);
    // a2 follows a1 (a row of its own); a3 follows a2 (packed by the transaction's first write);
    // b2 and a4 follow b1 and a3 (packed by the previous transaction).
    expect(first.map((r) => r.previousUnsent)).toEqual([a1, null, null, first[0]!.id]);
    expect(second.map((r) => r.previousUnsent)).toEqual([first[1]!.id, first[3]!.id]);
    expect(first[0]!.record).toEqual(record("a2", "a"));
    // The outbox table holds only a1; the messages wait in the packed rows, with those ids.
    expect((await ownRows()).map((r) => r.message_id)).toEqual(["a1"]);
    expect((await packedRows()).map((r) => [r.id, r.message_id, r.ordering_key, r.sent])).toEqual(
      [...first, ...second].map((r) => [r.id, r.record.messageId, r.record.orderingKey, false]),
    );
  });

  it("a message id already in the outbox or in a packed row, or twice in one write, is written once", async () => {
    await write([record("m1", "k", { body: "first m1" })]);
    const taken = attach();
    await write([record("m2", "k", { body: "first m2" }), record("m3", null)]);
    await write([record("m1", "k", { body: "second m1" }), record("m2", "k", { body: "second m2" }), record("m4", "k", { body: "first m4" }), record("m4", "k", { body: "second m4" })]);
    expect(taken.map((rows) => rows.map((r) => [r.record.messageId, r.record.body.toString()]))).toEqual([
      [["m2", "first m2"], ["m3", "m3"]],
      [["m4", "first m4"]],
    ]);
    // Nothing new: nothing written, nothing handed over.
    await write([record("m1", "k"), record("m3", null)]);
    expect(taken).toHaveLength(2);
    expect((await db.rows()).map((r) => r.message_id)).toEqual(["m1", "m2", "m3", "m4"]);
  });

  it("the settlement deletes the packed row: a confirmed message leaves nothing, a failed one becomes a row with its attempt and retry delay, the others rows due now", async () => {
    const taken = attach();
    await write([record("s1", "a"), record("f1", "b"), record("d1", "c"), record("s2", null)]);
    const [s1, f1, d1, s2] = taken[0]!;
    await store.settleHandedOff({
      sent: [s1!.id, s2!.id], failed: [{ id: f1!.id, error: "unroutable", retryDelayMs: 60_000 }], due: [d1!.id], deleteSent: true, packed: [s1!.packedIn!],
    });
    expect(await packedRows()).toEqual([]);
    expect((await db.rows()).map((r) => [r.id, r.message_id, r.sent, r.attempts, r.last_error])).toEqual([
      [f1!.id, "f1", false, 1, "unroutable"],
      [d1!.id, "d1", false, 0, null],
    ]);
    // d1 is due now; f1 waits for its retry.
    const next = await claim();
    expect(messageIds(next!.rows)).toEqual(["d1"]);
    expect(next!.rows[0]!.body.toString()).toBe("d1");
    await next!.settle({ sent: [d1!.id], failed: [], deleteSent: true });
    // Every message confirmed: the packed row goes, nothing is written.
    await write([record("s3", "a"), record("s4", null)]);
    await store.settleHandedOff({ sent: taken[1]!.map((r) => r.id), failed: [], due: [], deleteSent: true, packed: [taken[1]![0]!.packedIn!] });
    expect((await db.rows()).map((r) => r.message_id)).toEqual(["f1"]);
  });

  it("a settlement that also names rows of their own settles them as always, beside the packed rows, in both forms", async () => {
    // Rows of their own, handed over by a relay that keeps sent rows (no packing).
    const detach = store.outboxSignal.attach({ leaseMs: 60_000, take: () => undefined });
    await write([record("o1", "a"), record("o2", "b")]);
    detach();
    const [o1, o2] = (await ownRows()).map((r) => r.id);
    const taken = attach();
    await write([record("p1", "c"), record("p2", "d")]);
    await write([record("p3", "e")]);
    const [p1, p2] = taken[0]!;
    const [p3] = taken[1]!;
    // Every packed message confirmed: the form that reads no body back.
    await store.settleHandedOff({ sent: [o1!, p3!.id], failed: [], due: [], deleteSent: true, packed: [p3!.packedIn!] });
    expect((await db.rows()).map((r) => [r.message_id, r.packed ?? false])).toEqual([["o2", false], ["p1", true], ["p2", true]]);
    // A failure among them: the form that unpacks.
    await store.settleHandedOff({ sent: [p1!.id], failed: [{ id: o2!, error: "nack", retryDelayMs: 60_000 }], due: [p2!.id], deleteSent: true, packed: [p1!.packedIn!] });
    expect((await db.rows()).map((r) => [r.message_id, r.packed ?? false, r.attempts, r.last_error])).toEqual([["o2", false, 1, "nack"], ["p2", false, 0, null]]);
  });

  it("a claim takes no row of a key behind a message still packed, whoever wrote it; the key goes on once the packed row is settled", async () => {
    const taken = attach();
    await write([record("p1", "a"), record("p2", "b")]);
    // Another writer (no handoff: due rows) writes behind them, on key a, on key b, and on key c.
    const other = await db.open();
    cleanups.push(() => other.close());
    await other.outbox.transaction(async (_tx, publish) => {
      await publish("x", "", { n: 1 }, { orderingKey: "a", messageId: "w-a" });
      await publish("x", "", { n: 2 }, { orderingKey: "b", messageId: "w-b" });
      await publish("x", "", { n: 3 }, { orderingKey: "c", messageId: "w-c" });
    });
    const blocked = await claim();
    expect(messageIds(blocked!.rows)).toEqual(["w-c"]);
    await blocked!.settle({ sent: [blocked!.rows[0]!.id], failed: [] });
    // p1 confirmed, p2 failed: the packed row goes, p2 becomes a row waiting for its retry.
    const [p1, p2] = taken[0]!;
    await store.settleHandedOff({ sent: [p1!.id], failed: [{ id: p2!.id, error: "nack", retryDelayMs: 60_000 }], due: [], deleteSent: true, packed: [p1!.packedIn!] });
    const next = await claim();
    // Key a goes on; key b still waits behind p2, now a row of its own.
    expect(messageIds(next!.rows)).toEqual(["w-a"]);
    await next!.settle({ sent: next!.rows.map((r) => r.id), failed: [] });
  });

  it("a packed row whose lease ran out is unpacked by a claim and goes out in order with its key's other rows; a claim that rolls back leaves it packed", async () => {
    const taken = attach(300);
    await write([record("l1", "a"), record("l2", null), record("l3", "a")]);
    expect(await claim()).toBeNull();
    // The first claim after the lease ends unpacks the row and takes every message, in id order.
    const late = await claimWhenWhole(claim, 3, "the messages claimable once their lease ended");
    expect(late.rows.map((r) => [r.id, r.messageId, r.orderingKey, r.attempts])).toEqual(taken[0]!.map((r) => [r.id, r.record.messageId, r.record.orderingKey, 0]));
    // Until that claim commits, what it unpacked is its own: others see the packed row still.
    expect((await db.rows()).map((r) => [r.message_id, r.packed ?? false])).toEqual([["l1", true], ["l2", true], ["l3", true]]);
    await late.settle({ sent: [], failed: [] });
    // Settled with nothing sent: the messages are rows of their own now, unsent and due.
    expect((await db.rows()).map((r) => [r.message_id, r.packed ?? false, r.sent])).toEqual([["l1", false, false], ["l2", false, false], ["l3", false, false]]);
    const again = await claim();
    await again!.settle({ sent: again!.rows.map((r) => r.id), failed: [], deleteSent: true });
    expect(await db.rows()).toEqual([]);
  });

  it("a settlement leaves alone a packed row a claim is unpacking, without waiting for it; that claim publishes its messages", async () => {
    const taken = attach(300);
    await write([record("u1", "a"), record("u2", "a")]);
    const held = await claimWhenWhole(claim, 2, "the claim that unpacks the expired row");
    // The process that wrote them confirms them late: the row is the claim's (locked), skipped at once.
    const started = Date.now();
    await store.settleHandedOff({ sent: taken[0]!.map((r) => r.id), failed: [], due: [], deleteSent: true, packed: [taken[0]![0]!.packedIn!] });
    expect(Date.now() - started).toBeLessThan(5_000);
    await held.settle({ sent: held.rows.map((r) => r.id), failed: [], deleteSent: true });
    expect(await db.rows()).toEqual([]);
  });

  it("a duplicate's resend unpacks the packed row that holds its event's messages, due now, with the rest of its transaction", async () => {
    const taken = attach();
    await write([record("r1", "a", { eventId: "e1" }), record("r2", "b", { eventId: "e2" })]);
    await write([record("r3", "c", { eventId: "e3" })]);
    expect(await store.resendOutbox("h", [{ tenant: "t", eventId: "e2" }])).toBe(2);
    expect((await db.rows()).map((r) => [r.message_id, r.packed ?? false])).toEqual([["r1", false], ["r2", false], ["r3", true]]);
    const claimed = await claim();
    expect(messageIds(claimed!.rows)).toEqual(["r1", "r2"]);
    expect(claimed!.rows.map((r) => r.id)).toEqual(taken[0]!.map((r) => r.id));
    // Another handler's event, or an event with nothing packed: nothing to unpack.
    expect(await store.resendOutbox("other", [{ tenant: "t", eventId: "e3" }])).toBe(0);
    expect(await store.resendOutbox("h", [{ tenant: "t", eventId: "e9" }])).toBe(0);
  });

  it("the pending counts (backpressure, backlog) count the messages in packed rows", async () => {
    attach();
    await write([record("c1", "a"), record("c2", null), record("c3", "b")]);
    // Another process's writer, with no relay attached: a row of its own, due.
    const other = await db.open();
    cleanups.push(() => other.close());
    await other.outbox.transaction(async (_tx, publish) => { await publish("x", "", { n: 1 }, { messageId: "own" }); });
    expect((await db.rows()).map((r) => [r.message_id, r.packed ?? false])).toEqual([["c1", true], ["c2", true], ["c3", true], ["own", false]]);
    expect(await store.countPendingOutbox(100)).toBe(4);
    const backlog = await store.operations().outboxBacklog();
    expect(backlog.pending).toBe(4);
    expect(backlog.oldestPendingAt).not.toBeNull();
  });
});
