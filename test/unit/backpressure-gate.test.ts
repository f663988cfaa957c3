/**
 * The gate between a Backpressure and the consumer's batches (how often it asks, what it does
 * with each answer and with a failed check, what it logs, how it lets go when the consumer
 * stops), and outboxBackpressure's bound with its hysteresis and its explanation of a pause.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { BackpressureGate, STILL_PAUSED_LOG_INTERVAL_MS } from "../../src/amqp/backpressure-gate.js";
import type { Backpressure, BackpressureReading } from "../../src/core/backpressure.js";
import { InboxConfigError } from "../../src/core/errors.js";
import { outboxBackpressure } from "../../src/outbox/outbox-backpressure.js";
import type { OutboxBacklog } from "../../src/core/store-contract/outbox-admin.js";
import { type LogLine, recordingLogger } from "../support/recording-logger.js";

const INTERVAL = 100;

/** A Backpressure whose answers the test scripts; each check waits until the test answers it. */
function scripted() {
  const asked: boolean[] = [];
  const answers: Array<{ resolve: (r: BackpressureReading) => void; reject: (e: Error) => void }> = [];
  const source: Backpressure = {
    name: "test backlog",
    checkIntervalMs: INTERVAL,
    check(paused) {
      asked.push(paused);
      return new Promise((resolve, reject) => answers.push({ resolve, reject }));
    },
  };
  return {
    source, asked,
    /** Answers the oldest open check. */
    async answer(pause: boolean, detail: Record<string, unknown> = {}) {
      const next = answers.shift();
      if (!next) throw new Error("no check is waiting for an answer");
      next.resolve({ pause, detail });
      await vi.advanceTimersByTimeAsync(0);
    },
    async fail(message: string) {
      answers.shift()!.reject(new Error(message));
      await vi.advanceTimersByTimeAsync(0);
    },
    get open() { return answers.length; },
  };
}

describe("BackpressureGate", () => {
  let lines: LogLine[];
  let opened: number;
  let clock: number;
  const gateOn = (source: Backpressure) => new BackpressureGate(source, {
    queue: "work", logger: recordingLogger(lines), onOpen: () => { opened++; }, now: () => clock,
  });

  beforeEach(() => {
    vi.useFakeTimers();
    lines = [];
    opened = 0;
    clock = 1_000_000;
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("lets batches start while checking in the background, at most once per interval", async () => {
    const s = scripted();
    const gate = gateOn(s.source);
    expect(gate.open).toBe(true);
    expect(s.asked).toEqual([false]);
    // Within the interval (and while a check is still out) no second check.
    clock += INTERVAL - 1;
    expect(gate.open).toBe(true);
    expect(s.asked).toEqual([false]);
    await s.answer(false, { pending: 3 });
    expect(gate.open).toBe(true);
    expect(s.asked).toHaveLength(1);
    clock += 1;
    expect(gate.open).toBe(true);
    expect(s.asked).toEqual([false, false]);
    await s.answer(false);
    expect(lines).toEqual([]);
    expect(gate.state()).toEqual({ name: "test backlog", paused: false, pausedSince: null, detail: {} });
  });

  it("pauses on a check that says so, asks again once per interval with paused = true, and opens (once) when told", async () => {
    const s = scripted();
    const gate = gateOn(s.source);
    expect(gate.open).toBe(true);
    await s.answer(true, { pending: 50, maxPending: 50 });
    expect(gate.open).toBe(false);
    expect(lines).toEqual([{ level: "warn", message: "test backlog over its bound: no new batch starts until it comes down (deliveries held stay unacked)", fields: { queue: "work", pending: 50, maxPending: 50 } }]);
    expect(gate.state()).toEqual({ name: "test backlog", paused: true, pausedSince: new Date(1_000_000), detail: { pending: 50, maxPending: 50 } });

    // Reading `open` while paused does not ask: the timer does, once per interval.
    clock += 5 * INTERVAL;
    expect(gate.open).toBe(false);
    expect(s.asked).toEqual([false]);
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(s.asked).toEqual([false, true]);
    await s.answer(true, { pending: 40 });
    expect(gate.open).toBe(false);
    expect(opened).toBe(0);
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(s.asked).toEqual([false, true, true]);
    clock += 2500;
    await s.answer(false, { pending: 10 });
    expect(opened).toBe(1);
    expect(gate.open).toBe(true);
    expect(lines.at(-1)).toEqual({ level: "info", message: "test backlog back under its bound: consumption resumes", fields: { queue: "work", pausedMs: 3000, pending: 10 } });
    // Open again: a batch start asks (the last check began long ago), the timer no longer does.
    expect(s.asked).toEqual([false, true, true, false]);
    await s.answer(false);
    await vi.advanceTimersByTimeAsync(10 * INTERVAL);
    expect(s.asked).toHaveLength(4);
    expect(s.open).toBe(0);
  });

  it("keeps its state on a failed check: open stays open, paused stays paused and asks again", async () => {
    const s = scripted();
    const gate = gateOn(s.source);
    expect(gate.open).toBe(true);
    await s.fail("connection refused");
    expect(gate.open).toBe(true);
    expect(lines).toEqual([{ level: "warn", message: "could not read the test backlog; consumption stays on until a check succeeds", fields: { queue: "work", error: "connection refused" } }]);
    // Open: the next batch start asks again, no timer does.
    await vi.advanceTimersByTimeAsync(5 * INTERVAL);
    expect(s.asked).toEqual([false]);
    clock += INTERVAL;
    expect(gate.open).toBe(true);
    await s.answer(true);
    expect(gate.open).toBe(false);
    await vi.advanceTimersByTimeAsync(INTERVAL);
    await s.fail("timeout");
    expect(gate.open).toBe(false);
    expect(lines.at(-1)!.message).toBe("could not read the test backlog; consumption stays paused until a check succeeds");
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(s.asked).toEqual([false, false, true, true]);
    await s.answer(false);
    expect(gate.open).toBe(true);
    expect(opened).toBe(1);
  });

  it("says it is still paused once a minute, with the last figures", async () => {
    const s = scripted();
    const gate = gateOn(s.source);
    expect(gate.open).toBe(true);
    await s.answer(true, { pending: 60 });
    for (let elapsed = INTERVAL; elapsed <= STILL_PAUSED_LOG_INTERVAL_MS; elapsed += INTERVAL) {
      clock += INTERVAL;
      await vi.advanceTimersByTimeAsync(INTERVAL);
      await s.answer(true, { pending: 60 + elapsed / INTERVAL });
    }
    const still = lines.filter((l) => l.message === "consumption still paused on the test backlog");
    expect(still).toEqual([{ level: "warn", message: "consumption still paused on the test backlog", fields: { queue: "work", pausedMs: STILL_PAUSED_LOG_INTERVAL_MS, pending: 660 } }]);
  });

  it("release() opens a paused gate for good without waiting for a check under way, whose answer changes nothing, and stops polling", async () => {
    const s = scripted();
    const gate = gateOn(s.source);
    expect(gate.open).toBe(true);
    await s.answer(true);
    await vi.advanceTimersByTimeAsync(INTERVAL);
    expect(s.open).toBe(1);
    gate.release();
    expect(opened).toBe(1);
    expect(gate.open).toBe(true);
    await s.answer(true, { pending: 99 });
    expect(gate.open).toBe(true);
    expect(lines).toHaveLength(1);
    expect(gate.state()).toMatchObject({ paused: false, pausedSince: null });
    await vi.advanceTimersByTimeAsync(10 * INTERVAL);
    clock += 10 * INTERVAL;
    expect(gate.open).toBe(true);
    expect(s.asked).toEqual([false, true]);
    expect(opened).toBe(1);
  });

  it("a check that fails after release() logs nothing: the consumer is stopping", async () => {
    const s = scripted();
    const gate = gateOn(s.source);
    expect(gate.open).toBe(true);
    gate.release();
    await s.fail("pool closed");
    expect(lines).toEqual([]);
    await vi.advanceTimersByTimeAsync(10 * INTERVAL);
    expect(s.asked).toEqual([false]);
  });

  it("release() of an open gate calls nothing back and asks nothing", () => {
    const s = scripted();
    const gate = gateOn(s.source);
    gate.release();
    expect(gate.open).toBe(true);
    expect(s.asked).toEqual([]);
    expect(opened).toBe(0);
  });
});

describe("outboxBackpressure", () => {
  const store = (pending: () => number, atMost: number[] = []) => ({
    countPendingOutbox: (n: number) => { atMost.push(n); return Promise.resolve(Math.min(pending(), n)); },
  });

  it("pauses at maxPending, resumes under resumeBelow (half by default), counting up to maxPending only", async () => {
    let pending = 0;
    const asked: number[] = [];
    const bp = outboxBackpressure({ store: store(() => pending, asked), maxPending: 100 });
    expect(bp).toMatchObject({ name: "outbox backlog", checkIntervalMs: 500 });
    pending = 99;
    expect(await bp.check(false)).toEqual({ pause: false, detail: { pending: 99, atBound: false, maxPending: 100, resumeBelow: 50 } });
    pending = 100;
    expect((await bp.check(false)).pause).toBe(true);
    pending = 5000;
    expect(await bp.check(false)).toEqual({ pause: true, detail: { pending: 100, atBound: true, maxPending: 100, resumeBelow: 50 } });
    // Paused: goes on only under resumeBelow.
    pending = 99;
    expect((await bp.check(true)).pause).toBe(true);
    pending = 50;
    expect((await bp.check(true)).pause).toBe(true);
    pending = 49;
    expect(await bp.check(true)).toEqual({ pause: false, detail: { pending: 49, atBound: false, maxPending: 100, resumeBelow: 50 } });
    expect(new Set(asked)).toEqual(new Set([100]));
  });

  it("takes resumeBelow and checkIntervalMs", async () => {
    let pending = 10;
    const bp = outboxBackpressure({ store: store(() => pending), maxPending: 10, resumeBelow: 10, checkIntervalMs: 50 });
    expect(bp.checkIntervalMs).toBe(50);
    expect(outboxBackpressure({ store: store(() => 0), checkIntervalMs: 1 }).checkIntervalMs).toBe(1);
    expect((await bp.check(false)).pause).toBe(true);
    pending = 9;
    expect((await bp.check(true)).pause).toBe(false);
    expect((await outboxBackpressure({ store: store(() => 9_999) }).check(false)).pause).toBe(false);
    expect((await outboxBackpressure({ store: store(() => 10_000) }).check(false)).detail).toMatchObject({ maxPending: 10_000, resumeBelow: 5_000 });
  });

  it("explains a pause once, when it begins, from the store's backlog: how many rows, how old, failing and unroutable", async () => {
    const backlog: OutboxBacklog = {
      pending: 12_345, failing: 12_000, unroutable: 11_000, oldestPendingAt: new Date(1000), now: new Date(61_000),
      worst: { exchange: "ledger.balance-changed", routingKey: "", attempts: 9, lastError: "NO_ROUTE" },
    };
    let reads = 0;
    const withOperations = { ...store(() => 12_345), operations: () => ({ outboxBacklog: () => { reads++; return Promise.resolve(backlog); } }) };
    const bp = outboxBackpressure({ store: withOperations, maxPending: 1000 });
    expect((await bp.check(false)).detail).toEqual({
      pending: 1000, atBound: true, maxPending: 1000, resumeBelow: 500,
      pendingTotal: 12_345, failing: 12_000, unroutable: 11_000, oldestPendingAgeSeconds: 60,
      worst: { exchange: "ledger.balance-changed", routingKey: "", attempts: 9, lastError: "NO_ROUTE" },
    });
    expect(reads).toBe(1);
    // While paused, the cheap count only.
    expect((await bp.check(true)).detail).toEqual({ pending: 1000, atBound: true, maxPending: 1000, resumeBelow: 500 });
    expect(reads).toBe(1);
    const failing = { ...store(() => 2000), operations: () => ({ outboxBacklog: () => Promise.reject(new Error("lock timeout")) }) };
    expect((await outboxBackpressure({ store: failing, maxPending: 1000 }).check(false))).toEqual({
      pause: true, detail: { pending: 1000, atBound: true, maxPending: 1000, resumeBelow: 500, backlogReadFailed: "lock timeout" },
    });
  });

  it("a failed count rejects the check (the gate keeps its state)", async () => {
    const bp = outboxBackpressure({ store: { countPendingOutbox: () => Promise.reject(new Error("db down")) } });
    await expect(bp.check(false)).rejects.toThrow("db down");
  });

  it("refuses a store that cannot count and bounds that make no sense", async () => {
    expect(() => outboxBackpressure({ store: {} })).toThrow(InboxConfigError);
    expect(() => outboxBackpressure({ store: {} })).toThrow("outboxBackpressure needs a store that counts its pending outbox rows (countPendingOutbox): PostgresStore, MysqlStore or SqliteStore");
    const s = store(() => 0);
    expect(() => outboxBackpressure({ store: s, maxPending: 0 })).toThrow("outboxBackpressure maxPending must be an integer of 1 or more, got 0");
    expect(() => outboxBackpressure({ store: s, maxPending: 1.5 })).toThrow("maxPending must be an integer of 1 or more, got 1.5");
    expect(() => outboxBackpressure({ store: s, maxPending: 10, resumeBelow: 11 })).toThrow("outboxBackpressure resumeBelow must be an integer from 1 to 10, got 11");
    expect(() => outboxBackpressure({ store: s, maxPending: 10, resumeBelow: 0 })).toThrow("resumeBelow must be an integer from 1 to 10, got 0");
    expect(() => outboxBackpressure({ store: s, checkIntervalMs: 0 })).toThrow("outboxBackpressure checkIntervalMs must be a number from 1 to 2147483647, got 0");
    expect(() => outboxBackpressure({ store: s, checkIntervalMs: Number.NaN })).toThrow("checkIntervalMs must be a number from 1 to 2147483647, got NaN");
    await expect(outboxBackpressure({ store: s, maxPending: 1 }).check(false)).resolves.toMatchObject({ detail: { resumeBelow: 1 } });
  });
});
