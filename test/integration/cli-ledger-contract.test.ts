/**
 * The contract outside tests rely on, end to end with real processes:
 * the ledger runs as `node_modules/.bin/tsx examples/ledger/main.ts`;
 * `DATABASE_URL=<its database> npx rabbit-inbox cleanup --older-than 0s --force` purges every
 * dedup record first seen before now; a ledger event redelivered afterwards with an AMQP
 * `timestamp` before the new horizon is quarantined as `stale` and not applied, one stamped
 * after it is applied, and `npm run --silent ledger -- quarantine --json` shows reason `stale`.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { cliBalances, cliQuarantine } from "../../examples/ledger/driver/ledger-cli.js";
import { readLedgerTables } from "../../examples/ledger/driver/ledger-tables.js";
import { publishAll } from "../support/broker.js";
import { createEmptyDatabase } from "../support/databases.js";
import { LedgerService, ledgerTopology, runRabbitInbox, CLI_TEST_TIMEOUT_MS } from "../support/rabbit-inbox-cli.js";
import { TEST_DATABASES, type TestDatabaseKind } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function database(kind: TestDatabaseKind): Promise<string> {
  const created = await createEmptyDatabase(kind);
  cleanups.push(created.remove);
  return created.url;
}

const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

describe.each(TEST_DATABASES)("ledger contract on %s: cleanup --older-than 0s --force, then stale", (kind) => {
  it("purges every dedup record first seen before now; a redelivery stamped before the horizon is stale and not applied, one stamped after applies", async () => {
    const databaseUrl = await database(kind);
    const queue = `ledger.contract.${randomBytes(4).toString("hex")}`;
    cleanups.push(await ledgerTopology(queue));
    const ledger = await LedgerService.start({ queue, databaseUrl });

    const stampedBefore = new Date(Date.now() - 60_000);
    const opened = { type: "account.opened", tenant: "t1", event_id: "e-open", account_id: "a" };
    const credit = { type: "balance.adjusted", tenant: "t1", event_id: "e-1", account_id: "a", delta_cents: 100 };
    await publishAll(queue, [opened, credit], { timestamp: seconds(stampedBefore) });
    await ledger.waitForSettled(2);
    expect((await readLedgerTables(databaseUrl)).inbox.map((r) => r.event_id)).toEqual(["e-1", "e-open"]);

    // Exactly as the contract says, through npx in the repository.
    await new Promise((r) => setTimeout(r, 10)); // strictly before now
    const cleanup = await runRabbitInbox(["cleanup", "--older-than", "0s", "--force"], { DATABASE_URL: databaseUrl }, { npx: true });
    expect(cleanup.stderr).toBe("");
    expect(cleanup.code).toBe(0);
    expect(cleanup.stdout).toMatch(/^purged 2 dedup records first seen before \S+ in 1 batch/);
    expect(cleanup.stdout).toMatch(/purge horizon of ledger: \S+/);
    const horizon = new Date(/purge horizon of ledger: (\S+)/.exec(cleanup.stdout)![1]!);
    expect((await readLedgerTables(databaseUrl)).inbox).toEqual([]);

    // The broker redelivers the credit, stamped before the horizon: it cannot be told apart from
    // the event it purged, so it is quarantined, not applied a second time.
    await publishAll(queue, [credit], { timestamp: seconds(stampedBefore) });
    await ledger.waitForSettled(3);
    // Stamped after the horizon: a new event, applied.
    const stampedAfter = seconds(horizon) + 2;
    const second = { type: "balance.adjusted", tenant: "t1", event_id: "e-2", account_id: "a", delta_cents: 50 };
    await publishAll(queue, [second], { timestamp: stampedAfter });
    await ledger.waitForSettled(4);
    expect(ledger.settled()).toMatchObject({ applied: 3, quarantined: 1 });

    expect(await cliBalances(databaseUrl)).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 150 }]);
    expect(await cliQuarantine(databaseUrl)).toEqual([{ id: expect.any(Number), tenant: "t1", event_id: "e-1", reason: "stale" }]);
    const tables = await readLedgerTables(databaseUrl);
    expect(tables.inbox.map((r) => r.event_id)).toEqual(["e-2"]);
    expect(await ledger.stop()).toBe(0);
  }, CLI_TEST_TIMEOUT_MS);
});
