/**
 * The ledger's one-statement path for batches of adjustments (`adjustAccounts`, PostgreSQL)
 * against the general path (lock, replay, write) on real PostgreSQL: the same batches give the
 * same outcomes, balances and `balance.changed` outbox messages, including a missing account,
 * a balance that would leave the safe range half-way through a batch, duplicates and a
 * conflict. Two stores on one schema also run opposite-ordered batches at once: no deadlock.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ledgerHandler, type LedgerSql } from "../../examples/ledger/ledger-handler.js";
import { postgresLedgerSchema, postgresLedgerSql } from "../../examples/ledger/ledger-postgres.js";
import type { LedgerEvent } from "../../examples/ledger/events.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { Outcome } from "../../src/core/outcome.js";
import { silentLogger } from "../../src/core/logger.js";
import type { PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import { createPgSchema, openPostgresStore } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const MAX = Number.MAX_SAFE_INTEGER;
const opened = (id: string, account: string) => ({ type: "account.opened", tenant: "t1", event_id: id, account_id: account });
const adjusted = (id: string, account: string, delta: number) => ({ type: "balance.adjusted", tenant: "t1", event_id: id, account_id: account, delta_cents: delta });

/** The general path only: the same SQL without adjustAccounts. */
const generalSql: LedgerSql<PgClient> = {
  lockAccounts: (tx, keys) => postgresLedgerSql.lockAccounts(tx, keys),
  writeAccounts: (tx, created, updated) => postgresLedgerSql.writeAccounts(tx, created, updated),
};

async function ledgerStore(): Promise<{ store: PostgresStore; url: string }> {
  const schema = await createPgSchema();
  const store = await openPostgresStore(schema.url);
  cleanups.push(async () => { await store.close(); await schema.drop(); });
  await store.migrate();
  await store.transaction((tx) => tx.handle.query(postgresLedgerSchema));
  return { store, url: schema.url };
}

async function run(sql: LedgerSql<PgClient>, batches: ReadonlyArray<ReadonlyArray<object>>) {
  const { store } = await ledgerStore();
  const pipeline = new InboxPipeline<LedgerEvent, PgClient>({
    store, handler: ledgerHandler(sql, { balanceChangedExchange: "balance.changed" }), logger: silentLogger,
  });
  const outcomes: string[][] = [];
  for (const batch of batches) {
    const result: Outcome[] = await pipeline.process(batch.map((b) => incomingMessage(b)));
    outcomes.push(result.map((o) => (o.kind === "quarantined" ? `${o.reason}` : o.kind)));
  }
  const read = (text: string) => store.transaction(async (tx) => (await tx.handle.query(text)).rows);
  const balances = await read("SELECT account_id, balance_cents::text AS b FROM ledger_accounts ORDER BY account_id");
  const messages = await read("SELECT convert_from(body, 'UTF8') AS body FROM rabbit_inbox_outbox ORDER BY id");
  return { outcomes, balances, messages: messages.map((m) => JSON.parse(String(m.body)) as unknown) };
}

describe("ledger on PostgreSQL: the one-statement adjustment path", () => {
  it("gives the same outcomes, balances and balance.changed messages as the general path", async () => {
    const batches = [
      [opened("o-a", "a"), opened("o-b", "b")],
      [adjusted("e-1", "a", 100), adjusted("e-2", "b", 5), adjusted("e-3", "c", 1), adjusted("e-4", "a", -50), adjusted("e-5", "a", MAX - 10), adjusted("e-6", "b", 7)],
      [adjusted("e-7", "a", -20), adjusted("e-1", "a", 100), adjusted("e-2", "b", 6), adjusted("e-8", "a", MAX - 40), adjusted("e-9", "a", 10), adjusted("e-12", "a", 1)],
      [adjusted("e-10", "b", -12), adjusted("e-11", "b", -MAX)],
    ];
    let adjustCalls = 0;
    const fastSql: LedgerSql<PgClient> = { ...generalSql, adjustAccounts: (tx, sums) => { adjustCalls++; return postgresLedgerSql.adjustAccounts!(tx, sums); } };
    const fast = await run(fastSql, batches);
    // Batches 2-4 (adjustments only) took the one-statement path, each rejection a re-run.
    expect(adjustCalls).toBeGreaterThanOrEqual(3);
    const general = await run(generalSql, batches);
    expect(fast).toEqual(general);
    // And they are what the ledger's rules say.
    expect(fast.outcomes).toEqual([
      ["applied", "applied"],
      ["applied", "applied", "account_missing", "applied", "invalid", "applied"],
      ["applied", "duplicate", "conflict", "applied", "applied", "invalid"],
      ["applied", "applied"],
    ]);
    expect(fast.balances).toEqual([{ account_id: "a", b: String(MAX) }, { account_id: "b", b: String(-MAX) }]);
    expect(fast.messages.map((m) => (m as { balance_cents: number }).balance_cents)).toEqual([100, 5, 50, 12, 30, MAX - 10, MAX, 0, -MAX]);
  });

  it("opposite-ordered batches on two stores at once: every adjustment applied once, no deadlock", async () => {
    const { store, url } = await ledgerStore();
    const accounts = Array.from({ length: 20 }, (_, i) => `acc-${String(i).padStart(2, "0")}`);
    const first = new InboxPipeline<LedgerEvent, PgClient>({ store, handler: ledgerHandler(postgresLedgerSql), logger: silentLogger, retry: { maxAttempts: 1 } });
    await first.process(accounts.map((a) => incomingMessage(opened(`o-${a}`, a))));
    const other = await openPostgresStore(url);
    cleanups.push(() => other.close());
    const second = new InboxPipeline<LedgerEvent, PgClient>({ store: other, handler: ledgerHandler(postgresLedgerSql), logger: silentLogger, retry: { maxAttempts: 1 } });
    for (let round = 0; round < 20; round++) {
      const up = accounts.map((a) => incomingMessage(adjusted(`up-${round}-${a}`, a, 1)));
      const down = [...accounts].reverse().map((a) => incomingMessage(adjusted(`down-${round}-${a}`, a, 2)));
      const [x, y] = await Promise.all([first.process(up), second.process(down)]);
      expect([...x, ...y].map((o) => o.kind)).toEqual(new Array<string>(40).fill("applied"));
    }
    const rows = await store.transaction(async (tx) => (await tx.handle.query("SELECT DISTINCT balance_cents::int AS b FROM ledger_accounts")).rows);
    expect(rows).toEqual([{ b: 60 }]);
  });
});
