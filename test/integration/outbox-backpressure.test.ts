import { afterEach, describe, expect, it } from "vitest";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import type { LedgerProcess, LogRecord } from "../../examples/ledger/driver/ledger-process.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { ExchangeTap, type OutboxTestDatabase, createOutboxDatabase, eventually, outboxTableAt, sleep } from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/**
 * The ledger service with LEDGER_OUTBOX_MAX_PENDING: while its relay cannot publish (nothing is
 * bound to the `balance.changed` exchange yet, so every publish comes back unroutable and stays
 * pending), the consumer stops starting batches once the outbox holds the bound, holds what it
 * has unacked, and the broker keeps the rest; once a queue is bound the relay drains the
 * backlog, consumption resumes, and every event is applied and published exactly once.
 */

const ACCOUNTS = ["a", "b", "c", "d", "e"];
const ADJUSTMENTS = 3000;
const MAX_PENDING = 50;
const BATCH_SIZE = 10;
const PREFETCH = 200;

const pausedLine = (ledger: LedgerProcess): LogRecord | undefined => ledger.logs.find((r) => r.msg.startsWith("outbox backlog over its bound"));
const resumedLine = (ledger: LedgerProcess): LogRecord | undefined => ledger.logs.find((r) => r.msg.startsWith("outbox backlog back under its bound"));

describe.each(TEST_DATABASES)("outbox backpressure in the ledger service on %s", (kind) => {
  const t = useLedgerTest(kind);
  const taps: ExchangeTap[] = [];
  afterEach(async () => {
    for (const tap of taps.splice(0)) await tap.close();
  });

  async function publishEvents(): Promise<void> {
    await t.broker.publish(t.queue, ACCOUNTS.map((a) => accountOpened("t1", `open-${a}`, a)));
    await t.broker.publish(t.queue, Array.from({ length: ADJUSTMENTS }, (_, i) => balanceAdjusted("t1", `adj-${i}`, ACCOUNTS[i % ACCOUNTS.length]!, 1)));
  }

  async function pendingRows(): Promise<number> {
    return (await outboxTableAt(t.databaseUrl).rows()).filter((r) => !r.sent).length;
  }

  it("pauses at the bound while the relay cannot publish, holds its deliveries unacked, and resumes once the relay drains the backlog", async () => {
    const ledger = await t.start({ outboxMaxPending: MAX_PENDING, batchSize: BATCH_SIZE, prefetch: PREFETCH });
    await publishEvents();

    const paused = await eventually(() => pausedLine(ledger), "the consumer to pause on the outbox backlog", 30_000);
    expect(paused.level).toBe("warn");
    expect(paused).toMatchObject({ queue: t.queue, maxPending: MAX_PENDING, resumeBelow: MAX_PENDING / 2, atBound: true });
    // The line says what the backlog is made of. It is read when the bound is reached, which can
    // come before the broker has returned the relay's first publish, so the count may still be 0
    // there; the rows themselves say unroutable once the returns are in.
    expect(paused).toMatchObject({ pendingTotal: expect.any(Number), failing: expect.any(Number), unroutable: expect.any(Number) });
    if ((paused.failing as number) > 0) expect(paused.worst).toMatchObject({ exchange: `${t.queue}.balance-changed` });

    // Paused: the batch running when the check came back ends, and nothing more is applied; most
    // events still wait on the broker.
    const settledAtPauseLine = ledger.settled();
    await sleep(500);
    const settledAtPause = ledger.settled();
    expect(settledAtPause - settledAtPauseLine).toBeLessThanOrEqual(BATCH_SIZE);
    await sleep(1500);
    expect(ledger.settled()).toBe(settledAtPause);
    expect(settledAtPause).toBeLessThan(ACCOUNTS.length + ADJUSTMENTS);
    const waiting = (await t.broker.queueState(t.queue)).messageCount;
    expect(waiting).toBeGreaterThan(0);
    expect(waiting + settledAtPause).toBeLessThanOrEqual(ACCOUNTS.length + ADJUSTMENTS);
    const pendingWhilePaused = await pendingRows();
    expect(pendingWhilePaused).toBeGreaterThanOrEqual(MAX_PENDING);
    expect(pendingWhilePaused).toBeLessThan(ADJUSTMENTS);
    expect(resumedLine(ledger)).toBeUndefined();
    const returned = await eventually(async () => {
      const failed = (await outboxTableAt(t.databaseUrl).rows()).filter((r) => !r.sent && r.last_error !== null);
      return failed.length > 0 ? failed : undefined;
    }, "the relay to record a failed publish", 10_000);
    expect(returned.every((r) => r.attempts > 0 && r.exchange === `${t.queue}.balance-changed` && r.last_error!.includes("unroutable"))).toBe(true);

    // A queue bound to the exchange: the relay's retries get through, and the consumer goes on.
    const tap = await ExchangeTap.open(`${t.queue}.balance-changed`, { declare: false });
    taps.push(tap);
    await tap.waitForCount(ADJUSTMENTS, 90_000);
    const resumed = resumedLine(ledger);
    expect(resumed).toMatchObject({ level: "info", queue: t.queue, maxPending: MAX_PENDING });
    expect(resumed!.pending as number).toBeLessThan(MAX_PENDING / 2);
    expect(await t.stopWhenIdle([ledger])).toEqual([{ code: 0, signal: null }]);

    // Every event applied once and published at least once. A row can arrive twice only if it was
    // waiting when the queue was bound: a key's rows go out back to back, and when the binding
    // lands between two of them the first comes back unroutable, so the ones behind it stay
    // pending although delivered, and go out again after it (downstream dedups by message id).
    expect(ledger.settledCounts()).toMatchObject({ applied: ACCOUNTS.length + ADJUSTMENTS, quarantined: 0 });
    expect(tap.countsById().size).toBe(ADJUSTMENTS);
    const twice = [...tap.countsById()].filter(([, n]) => n > 1);
    const warnings = ledger.logs.filter((r) => r.level !== "info" && r.level !== "debug" && !r.msg.startsWith("outbox publish failed")).slice(-10);
    const diagnosis = JSON.stringify({ twice: twice.slice(0, 5), pendingWhilePaused, warnings });
    expect(twice.every(([, n]) => n === 2), diagnosis).toBe(true);
    expect(twice.length, diagnosis).toBeLessThanOrEqual(pendingWhilePaused);
    expect((await t.cli()).balances).toEqual(ACCOUNTS.map((a) => ({ tenant: "t1", account_id: a, balance_cents: ADJUSTMENTS / ACCOUNTS.length })));
    expect(await pendingRows()).toBe(0);
  }, 180_000);

  it("a SIGTERM while paused finishes what the consumer holds and exits 0; the rest stays on the broker", async () => {
    const ledger = await t.start({ outboxMaxPending: MAX_PENDING, batchSize: BATCH_SIZE, prefetch: PREFETCH });
    await publishEvents();
    await eventually(() => pausedLine(ledger), "the consumer to pause on the outbox backlog", 30_000);
    const settledAtPause = ledger.settled();

    const stoppedAt = Date.now();
    expect(await ledger.stop(20_000)).toEqual({ code: 0, signal: null });
    expect(Date.now() - stoppedAt).toBeLessThan(20_000);
    // What it held was applied and acked on the way out (a prefetch's worth, and the batch that was
    // running when the pause began); nothing more was taken.
    const applied = ledger.settled();
    expect(applied).toBeGreaterThan(settledAtPause);
    expect(applied - settledAtPause).toBeLessThanOrEqual(PREFETCH + BATCH_SIZE);
    expect(ledger.settledCounts().quarantined).toBe(0);
    expect(await t.depth()).toBe(ACCOUNTS.length + ADJUSTMENTS - applied);
    const { inbox } = await t.tables();
    expect(inbox).toHaveLength(applied);
  }, 120_000);
});

describe.each(TEST_DATABASES)("countPendingOutbox on %s", (kind) => {
  let db: OutboxTestDatabase;
  afterEach(async () => {
    await db.remove();
  });

  it("counts unsent rows up to the limit asked, and never a sent one", async () => {
    db = await createOutboxDatabase(kind);
    const store = await db.open();
    try {
      await store.migrate();
      expect(await store.countPendingOutbox(10)).toBe(0);
      const now = kind === "sqlite" ? `, ${Date.now()}, ${Date.now()}` : "";
      const columns = `message_id, exchange, routing_key, body, properties${kind === "sqlite" ? ", created_at, available_at" : ""}`;
      const body = kind === "postgres" ? "'\\x00'::bytea" : "X'00'";
      for (let i = 0; i < 7; i++) await db.exec(`INSERT INTO rabbit_inbox_outbox (${columns}) VALUES ('m-${i}', 'x', 'k', ${body}, '{}'${now})`);
      expect(await store.countPendingOutbox(100)).toBe(7);
      expect(await store.countPendingOutbox(7)).toBe(7);
      expect(await store.countPendingOutbox(3)).toBe(3);
      const sentAt = kind === "sqlite" ? String(Date.now()) : kind === "mysql" ? "UTC_TIMESTAMP(6)" : "now()";
      await db.exec(`UPDATE rabbit_inbox_outbox SET sent_at = ${sentAt} WHERE message_id IN ('m-0', 'm-1', 'm-2')`);
      expect(await store.countPendingOutbox(100)).toBe(4);
      expect(await store.countPendingOutbox(2)).toBe(2);
    } finally {
      await store.close();
    }
  });
});
