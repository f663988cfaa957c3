import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { REPO_ROOT, amqpUrlFromEnv } from "../../examples/ledger/driver/ledger-environment.js";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { outboxMessageId } from "../../src/index.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { ExchangeTap, deleteExchanges, eventually, outboxTableAt, sleep } from "../support/outbox.js";
import { TEST_DATABASES } from "../support/test-databases.js";

/**
 * The ledger's outbox contract, end to end with the real service process:
 * for every applied `balance.adjusted`, a persistent JSON `balance.changed` on the durable fanout
 * exchange `<LEDGER_QUEUE>.balance-changed`, with the balance right after that event (in delivery
 * order within a batch) and a message id that is the same every time that change is re-sent.
 */
describe.each(TEST_DATABASES)("ledger balance.changed through the outbox on %s", (kind) => {
  const t = useLedgerTest(kind);
  const taps: ExchangeTap[] = [];

  afterEach(async () => {
    for (const tap of taps.splice(0)) await tap.close();
    await deleteExchanges(`${t.queue}.balance-changed`);
  });

  /** With `declare: false` the exchange must exist: the service declares it (fanout, durable) at start. */
  async function tapBalanceChanged(declare = false): Promise<ExchangeTap> {
    const tap = await ExchangeTap.open(`${t.queue}.balance-changed`, { declare });
    taps.push(tap);
    return tap;
  }

  const changed = (tenant: string, accountId: string, balance: number, causedBy: string) =>
    JSON.stringify({ type: "balance.changed", tenant, account_id: accountId, balance_cents: balance, caused_by: causedBy });
  const messageIdOf = (tenant: string, eventId: string) => outboxMessageId({ tenant, handler: "ledger", eventId }, 0);

  it("publishes one balance.changed per applied adjustment, with the balance after each event in delivery order", async () => {
    const ledger = await t.start();
    const tap = await tapBalanceChanged();
    await t.broker.publish(t.queue, [
      accountOpened("t1", "o-a", "a"),
      accountOpened("t1", "o-b", "b"),
      accountOpened("t2", "o-a2", "a"),
      balanceAdjusted("t1", "e-1", "a", 100),
      balanceAdjusted("t1", "e-2", "a", -30),
      balanceAdjusted("t2", "e-1", "a", 9), // same event id, other tenant: its own change
      balanceAdjusted("t1", "e-3", "a", 5),
      balanceAdjusted("t1", "e-4", "b", 7),
      balanceAdjusted("t1", "e-1", "a", 100), // duplicate: no second change
      balanceAdjusted("t1", "e-5", "missing", 1), // no such account: waits in a delayed retry, nothing published
      "{not json",
    ]);
    await tap.waitForCount(5);
    await sleep(500);
    expect(await t.stopWhenIdle([ledger])).toEqual([{ code: 0, signal: null }]);

    expect(tap.messages.map((m) => m.body.toString())).toEqual(expect.arrayContaining([
      changed("t1", "a", 100, "e-1"), changed("t1", "a", 70, "e-2"), changed("t1", "a", 75, "e-3"),
      changed("t1", "b", 7, "e-4"), changed("t2", "a", 9, "e-1"),
    ]));
    expect(tap.messages).toHaveLength(5);
    // One account's changes arrive in the order they happened.
    expect(tap.messages.filter((m) => (m.json as { tenant: string; account_id: string }).tenant === "t1"
      && (m.json as { account_id: string }).account_id === "a").map((m) => (m.json as { balance_cents: number }).balance_cents)).toEqual([100, 70, 75]);
    for (const m of tap.messages) {
      const body = m.json as { tenant: string; caused_by: string };
      expect(m.messageId).toBe(messageIdOf(body.tenant, body.caused_by));
      expect(m.deliveryMode).toBe(2);
      expect(m.contentType).toBe("application/json");
    }
    expect((await t.cli()).balances).toEqual([
      { tenant: "t1", account_id: "a", balance_cents: 75 },
      { tenant: "t1", account_id: "b", balance_cents: 7 },
      { tenant: "t2", account_id: "a", balance_cents: 9 },
    ]);
    // By default the ledger keeps no sent rows: each was deleted once its publish was confirmed.
    expect(await outboxTableAt(t.databaseUrl).rows()).toEqual([]);
  });

  it("with LEDGER_OUTBOX_SENT_RETENTION_MS set, the sent rows stay, marked sent", async () => {
    const ledger = await t.start({ outboxSentRetentionMs: 3_600_000 });
    const tap = await tapBalanceChanged();
    await t.broker.publish(t.queue, [accountOpened("t1", "o-a", "a"), balanceAdjusted("t1", "e-1", "a", 100), balanceAdjusted("t1", "e-2", "a", 5)]);
    await tap.waitForCount(2);
    expect(await t.stopWhenIdle([ledger])).toEqual([{ code: 0, signal: null }]);
    expect((await outboxTableAt(t.databaseUrl).rows()).map((r) => [r.message_id, r.sent, r.attempts])).toEqual([
      [messageIdOf("t1", "e-1"), true, 1], [messageIdOf("t1", "e-2"), true, 1],
    ]);
  });

  it("a change committed before a crash is sent after the restart, and every re-send carries the same message id", async () => {
    const open = accountOpened("t1", "e-open", "a");
    const credit = balanceAdjusted("t1", "e-credit", "a", 100);
    const tap = await tapBalanceChanged(true); // before the service runs: declared as the service does

    // Committed (balance and outbox row), then the process dies before the ack and before its relay ran.
    const first = await t.start({ fault: "after-commit:crash:2" });
    await t.broker.publish(t.queue, [open, credit]);
    expect(await first.waitForExit()).toEqual({ code: 70, signal: null });
    const table = outboxTableAt(t.databaseUrl);
    expect((await table.rows()).map((r) => [r.message_id, r.sent])).toEqual([[messageIdOf("t1", "e-credit"), false]]);
    expect(tap.messages).toHaveLength(0);

    // The restart gets the redelivery as a duplicate (no second change) and sends the pending one
    // (keeping it, marked, so that the relay's death before the mark can be staged below).
    const second = await t.start({ outboxSentRetentionMs: 3_600_000 });
    await tap.waitForCount(1);
    await second.waitForSettled(1);
    expect(await t.stopWhenIdle([second])).toEqual([{ code: 0, signal: null }]);
    expect(second.redeliveries()).toContainEqual({ tenant: "t1", eventId: "e-credit", outcome: "duplicate" });
    expect((await table.rows()).map((r) => [r.message_id, r.sent])).toEqual([[messageIdOf("t1", "e-credit"), true]]);

    // A relay that died after publishing and before marking leaves the row unsent: it is sent again, identical.
    await table.exec("UPDATE rabbit_inbox_outbox SET sent_at = NULL");
    const third = await t.start({ outboxSentRetentionMs: 3_600_000 });
    await tap.waitForCount(2);
    expect(await t.stopWhenIdle([third])).toEqual([{ code: 0, signal: null }]);

    expect(tap.messages.map((m) => m.messageId)).toEqual([messageIdOf("t1", "e-credit"), messageIdOf("t1", "e-credit")]);
    expect(tap.messages.map((m) => m.body.toString())).toEqual([changed("t1", "a", 100, "e-credit"), changed("t1", "a", 100, "e-credit")]);
    expect((await t.cli()).balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 100 }]);
  });

  it("as `npm start` runs it (node --import tsx examples/ledger/main.ts): balance.changed arrives, SIGTERM exits 0", async () => {
    // The ledger runs in the process that receives the signal: tsx's command-line runner relays
    // SIGTERM to a child and kills it outright when the child does not answer within 60 ms,
    // which a busy ledger (or a loaded machine) does not, so it never drained.
    const start = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts.start;
    expect(start).toBe("node --import tsx examples/ledger/main.ts");
    const env: NodeJS.ProcessEnv = { ...process.env, AMQP_URL: amqpUrlFromEnv(), DATABASE_URL: t.databaseUrl, LEDGER_QUEUE: t.queue };
    for (const name of ["RABBIT_INBOX_FAULT", "LEDGER_BATCH_SIZE", "LEDGER_PREFETCH", "LEDGER_QUEUE_TYPE", "NODE_OPTIONS"]) delete env[name];
    const child = spawn(process.execPath, ["--import", "tsx", "examples/ledger/main.ts"], { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("close", (code, signal) => resolve({ code, signal })));
    const stdout: string[] = [];
    createInterface({ input: child.stdout }).on("line", (line) => stdout.push(line));
    try {
      await eventually(() => (stdout.some((l) => l.startsWith("ledger: consuming")) ? true : undefined), "ledger: consuming", 30_000);
      const tap = await tapBalanceChanged();
      await t.broker.publish(t.queue, [accountOpened("t9", "o-1", "acc"), balanceAdjusted("t9", "x-1", "acc", -250)]);
      const [message] = await tap.waitForCount(1);
      expect(message!.body.toString()).toBe(changed("t9", "acc", -250, "x-1"));
      expect(message!.messageId).toBe(messageIdOf("t9", "x-1"));
      expect(message!.deliveryMode).toBe(2);
      child.kill("SIGTERM");
      expect(await exited).toEqual({ code: 0, signal: null });
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("SIGTERM drains the consumer and then the relay: what the last batch committed is published before exit", async () => {
    const ledger = await t.start();
    const tap = await tapBalanceChanged();
    const events = [accountOpened("t1", "o", "a"), ...Array.from({ length: 200 }, (_, i) => balanceAdjusted("t1", `d-${i}`, "a", 1))];
    await t.broker.publish(t.queue, events);
    await ledger.waitForSettled(50);
    expect(await ledger.stop()).toEqual({ code: 0, signal: null });
    // Everything committed before the exit was also sent (and its row deleted) before the exit.
    expect(await outboxTableAt(t.databaseUrl).rows()).toEqual([]);
    const applied = (await t.cli()).balances[0]?.balance_cents ?? 0;
    expect(applied).toBeGreaterThan(0);
    await eventually(() => (new Set(tap.messages.map((m) => m.messageId)).size >= applied ? true : undefined), "the tap to receive every sent change");
    expect(new Set(tap.messages.map((m) => m.messageId)).size).toBe(applied);
  });
});
