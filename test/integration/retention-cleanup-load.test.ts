/**
 * Cleanup in batches while consumers run: two ledger processes consume a steady stream of
 * timestamped events while `rabbit-inbox cleanup` runs again and again with a short window.
 * The consumers must not notice: no transient retries (lock timeouts, deadlocks, SQLITE_BUSY),
 * no errors, nothing stale, every event applied exactly once; and cleanup really purged rows
 * while they ran.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { readLedgerTables } from "../../examples/ledger/driver/ledger-tables.js";
import { publishAll, waitFor } from "../support/broker.js";
import { createEmptyDatabase } from "../support/databases.js";
import { LedgerService, ledgerTopology, runRabbitInbox } from "../support/rabbit-inbox-cli.js";
import { TEST_DATABASES } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const ACCOUNTS = 20;
const ROUNDS = 24;
const PER_ROUND = 100;

describe.each(TEST_DATABASES)("cleanup while consumers run on %s", (kind) => {
  it("purges in small batches without a single transient retry or error in the consumers", { timeout: 180_000 }, async () => {
    const database = await createEmptyDatabase(kind);
    cleanups.push(database.remove);
    const databaseUrl = database.url;
    const queue = `ledger.cleanup.${randomBytes(4).toString("hex")}`;
    cleanups.push(await ledgerTopology(queue));
    const consumers = [await LedgerService.start({ queue, databaseUrl })];
    const settled = () => consumers.reduce((n, c) => n + c.total(), 0);

    const stamp = () => ({ timestamp: Math.floor(Date.now() / 1000) });
    // The accounts are opened by one consumer before the second starts: two transactions creating
    // the same missing accounts can deadlock each other on MySQL's gap locks (and retry, which
    // is correct but would blur what this test isolates: cleanup's effect on the consumers).
    await publishAll(queue, Array.from({ length: ACCOUNTS }, (_, a) => ({ type: "account.opened", tenant: "t1", event_id: `open-${a}`, account_id: `acc-${a}` })), stamp());
    await waitFor(() => settled() === ACCOUNTS, 30_000, "the accounts opened");
    consumers.push(await LedgerService.start({ queue, databaseUrl }));

    const expected = new Map<string, number>();
    let publishing = true;
    const producer = (async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const batch = Array.from({ length: PER_ROUND }, (_, i) => {
          const account = `acc-${(round * PER_ROUND + i) % ACCOUNTS}`;
          const delta = ((round * 7 + i) % 13) - 6;
          expected.set(account, (expected.get(account) ?? 0) + delta);
          return { type: "balance.adjusted", tenant: "t1", event_id: `adj-${round}-${i}`, account_id: account, delta_cents: delta };
        });
        await publishAll(queue, batch, stamp());
        await sleep(400);
      }
      publishing = false;
    })();

    // Cleanup again and again, in batches of 50, with a window the events outlive within the run.
    const runs: Array<{ purged: number; batches: number; settledAtStart: number }> = [];
    while (publishing || settled() < ACCOUNTS + ROUNDS * PER_ROUND) {
      const settledAtStart = settled();
      const run = await runRabbitInbox(["cleanup", "--older-than", "3s", "--force", "--batch-size", "50", "--pause", "5ms", "--json"], { DATABASE_URL: databaseUrl });
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      const report = JSON.parse(run.stdout) as { purged: number; batches: number };
      runs.push({ purged: report.purged, batches: report.batches, settledAtStart });
      await sleep(300);
    }
    await producer;
    for (const c of consumers) expect(await c.stop()).toBe(0);

    // Cleanup did real work while the consumers were busy, in many small batches.
    const during = runs.filter((r) => r.settledAtStart < ACCOUNTS + ROUNDS * PER_ROUND);
    expect(during.reduce((n, r) => n + r.purged, 0)).toBeGreaterThan(500);
    expect(Math.max(...runs.map((r) => r.batches))).toBeGreaterThan(1);

    // The consumers never retried, never failed, never saw a stale event.
    for (const c of consumers) {
      expect(c.logs.filter((l) => l.msg === "transaction failed, retrying" || l.msg.startsWith("batch failed"))).toEqual([]);
      expect(c.logs.filter((l) => l.level === "error")).toEqual([]);
      expect(c.settled()).toMatchObject({ quarantined: 0, requeue: 0 });
    }
    const tables = await readLedgerTables(databaseUrl);
    expect(tables.quarantine).toEqual([]);
    expect(Object.fromEntries(tables.accounts.map((a) => [a.account_id, a.balance_cents]))).toEqual(
      Object.fromEntries(Array.from({ length: ACCOUNTS }, (_, a) => [`acc-${a}`, expected.get(`acc-${a}`) ?? 0])),
    );
    expect(consumers.reduce((n, c) => n + (c.settled().applied ?? 0), 0)).toBe(ACCOUNTS + ROUNDS * PER_ROUND);
  });
});
