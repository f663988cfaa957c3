import { describe, expect, it } from "vitest";
import { type LedgerMessage, accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import type { SettledCounts } from "../../examples/ledger/driver/ledger-process.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import { seededRandom, useLedgerTest } from "../support/ledger-harness.js";
import { TEST_DATABASES } from "../support/test-databases.js";

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

const key = (tenant: string, id: string) => `${tenant}/${id}`;

describe.each(TEST_DATABASES)("ledger under duplicates, concurrency and shutdown on %s", (kind) => {
  const t = useLedgerTest(kind);

  it("400 events published 3 times each, interleaved, into 2 consumer processes (prefetch 50) apply once each", async () => {
    const random = seededRandom(kind === "postgres" ? 1 : 2);
    const tenants = ["t1", "t2"];
    const accounts = ["acc-0", "acc-1", "acc-2", "acc-3", "acc-4"];
    const ledgers = await Promise.all([t.start({ prefetch: 50, label: "ledger A" }), t.start({ prefetch: 50, label: "ledger B" })]);
    const settled = () => ledgers.reduce((sum, p) => sum + p.settled(), 0);
    const waitForSettled = (n: number) => waitUntil(() => (settled() >= n ? true : undefined), `${n} settled deliveries`, { watch: ledgers, timeoutMs: 60_000 });

    // Accounts first: an adjustment racing its account's opening on the other consumer would be
    // (rightly) quarantined as account_missing, which is not what this test is about.
    const opens = tenants.flatMap((tenant) => accounts.map((a) => accountOpened(tenant, `open-${a}`, a)));
    await t.broker.publish(t.queue, shuffle([...opens, ...opens, ...opens], random));
    await waitForSettled(opens.length * 3);

    // The same event ids in both tenants, with different amounts: two events each, no conflict.
    const adjustments: LedgerMessage[] = [];
    const expected = new Map<string, number>();
    for (const tenant of tenants) {
      for (let i = 0; i < 200; i++) {
        const account = accounts[Math.floor(random() * accounts.length)]!;
        const delta = Math.floor(random() * 2001) - 500;
        adjustments.push(balanceAdjusted(tenant, `e-${i}`, account, delta));
        expected.set(key(tenant, account), (expected.get(key(tenant, account)) ?? 0) + delta);
      }
    }
    const messages = shuffle([...adjustments, ...adjustments, ...adjustments], random);
    await t.broker.publish(t.queue, messages);
    await waitForSettled(opens.length * 3 + messages.length);
    expect(await t.stopWhenIdle(ledgers)).toEqual([{ code: 0, signal: null }, { code: 0, signal: null }]);

    const counts = ledgers.map((p) => p.stoppedCounts()!);
    expect(counts.every((c) => c.applied > 0)).toBe(true); // both consumers really took part
    const total = (k: keyof SettledCounts) => counts.reduce((sum, c) => sum + c[k], 0);
    expect({ applied: total("applied"), duplicate: total("duplicate"), quarantined: total("quarantined"), delayed: total("delayed"), requeue: total("requeue") })
      .toEqual({ applied: 410, duplicate: 820, quarantined: 0, delayed: 0, requeue: 0 });

    const [{ balances, quarantine }, tables] = await Promise.all([t.cli(), t.tables()]);
    const expectedBalances = tenants.flatMap((tenant) => accounts.map((a) => ({ tenant, account_id: a, balance_cents: expected.get(key(tenant, a)) ?? 0 })));
    expect(balances).toEqual(expectedBalances);
    expect(tables.accounts).toEqual(expectedBalances);
    expect(quarantine).toEqual([]);
    expect(tables.quarantine).toEqual([]);

    const inboxKeys = tables.inbox.map((r) => key(r.tenant, r.event_id));
    expect(inboxKeys).toHaveLength(410);
    expect(new Set(inboxKeys)).toEqual(new Set([...opens, ...adjustments].map((m) => key(m.tenant, m.event_id))));
    expect(tables.inbox.filter((r) => r.event_id === "e-7").map((r) => r.tenant)).toEqual(["t1", "t2"]);
    expect(tables.inbox.every((r) => r.handler === "ledger")).toBe(true);

    expect(await t.depth()).toBe(0);
    expect(await t.depth(t.quarantineQueue)).toBe(0);
  });

  it("SIGTERM mid-stream drains in-flight work, acks what it committed and exits 0", async () => {
    const first = await t.start({ batchSize: 1, label: "ledger (strict mode)" });
    await t.broker.publish(t.queue, [accountOpened("t1", "e-open", "a")]);
    await first.waitForSettled(1);
    const deltas = new Map<string, number>();
    const messages = Array.from({ length: 2000 }, (_, i) => {
      deltas.set(`e-${i}`, (i % 9) + 1);
      return balanceAdjusted("t1", `e-${i}`, "a", (i % 9) + 1);
    });
    await t.broker.publish(t.queue, messages);
    await first.waitForSettled(100, 60_000);

    expect(await first.stop()).toEqual({ code: 0, signal: null });
    expect(first.logs.map((r) => r.msg)).toEqual(expect.arrayContaining(["draining before exit", "stopped"]));
    const stopped = first.stoppedCounts()!;
    expect(stopped).toMatchObject({ duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 });

    // Everything committed was acked: committed + left in the queue = published, exactly.
    const left = await t.depth();
    expect(left).toBeGreaterThan(0); // it really stopped mid-stream
    const atExit = await t.tables();
    expect(atExit.inbox).toHaveLength(stopped.applied);
    expect(left + stopped.applied).toBe(messages.length + 1);
    const appliedSum = atExit.inbox.reduce((sum, r) => sum + (deltas.get(r.event_id) ?? 0), 0);
    expect(atExit.accounts).toEqual([{ tenant: "t1", account_id: "a", balance_cents: appliedSum }]);

    // A restart finds no committed-but-unacked message (no duplicate) and finishes the rest.
    const second = await t.start();
    expect(await t.stopWhenIdle([second])).toEqual([{ code: 0, signal: null }]);
    expect(second.stoppedCounts()).toEqual({ applied: left, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 });
    const [{ balances, quarantine }, tables] = await Promise.all([t.cli(), t.tables()]);
    const sum = [...deltas.values()].reduce((a, b) => a + b, 0);
    expect(balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: sum }]);
    expect(quarantine).toEqual([]);
    expect(tables.inbox).toHaveLength(messages.length + 1);
    expect(await t.depth()).toBe(0);
  });
});
