/**
 * The ledger on its own, as `npm start` runs it on a fresh broker, with nothing bound to its
 * `balance.changed` exchange: without LEDGER_SINK_QUEUE every `balance.changed` is unroutable and
 * waits in the outbox (doctor says so, with the fix); with it the ledger declares that durable
 * queue, bound to the exchange, and the messages arrive there. Real broker, SQLite.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { ledgerExchangeNames, ledgerQueueNames } from "../../examples/ledger/driver/ledger-topology.js";
import { deleteQueues, drainQueue, publishAll, withChannel } from "../support/broker.js";
import { createSqliteFile } from "../support/databases.js";
import { LedgerService, runRabbitInbox } from "../support/rabbit-inbox-cli.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function freshLedger(env: Record<string, string> = {}): Promise<{ ledger: LedgerService; queue: string; databaseUrl: string }> {
  const file = await createSqliteFile();
  cleanups.push(() => file.remove());
  const queue = `ri.test.sink.${randomBytes(4).toString("hex")}`;
  cleanups.push(async () => {
    await deleteQueues(...ledgerQueueNames(queue));
    for (const exchange of ledgerExchangeNames(queue)) await withChannel((ch) => ch.deleteExchange(exchange)).catch(() => undefined);
  });
  const ledger = await LedgerService.start({ queue, databaseUrl: file.file, env });
  cleanups.push(() => ledger.stop());
  return { ledger, queue, databaseUrl: file.file };
}

const story = (queue: string) => publishAll(queue, [
  { type: "account.opened", tenant: "t1", event_id: "e-open", account_id: "a" },
  { type: "balance.adjusted", tenant: "t1", event_id: "e-credit", account_id: "a", delta_cents: 250 },
]);

describe("the ledger's balance.changed with nothing else on the broker", () => {
  it("without LEDGER_SINK_QUEUE: unroutable, kept in the outbox, and doctor says what to bind", async () => {
    const { ledger, queue, databaseUrl } = await freshLedger();
    await story(queue);
    await ledger.waitForSettled(2);
    let doctor = await runRabbitInbox(["doctor"], { DATABASE_URL: databaseUrl });
    for (const deadline = Date.now() + 20_000; !/unroutable/.test(doctor.stdout) && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 200));
      doctor = await runRabbitInbox(["doctor"], { DATABASE_URL: databaseUrl });
    }
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(new RegExp(`^FAIL\\s+outbox: 1 unsent message.*unroutable.*\\n\\s+fix: bind a queue to exchange "${queue.replaceAll(".", "\\.")}\\.balance-changed"`, "m"));
  });

  it("with LEDGER_SINK_QUEUE: the ledger declares that queue, bound to its exchange, and balance.changed arrives there", async () => {
    const sinkName = `ri.test.sink-${randomBytes(4).toString("hex")}`;
    cleanups.push(() => deleteQueues(sinkName));
    const { ledger, queue, databaseUrl } = await freshLedger({ LEDGER_SINK_QUEUE: sinkName });
    await story(queue);
    await ledger.waitForSettled(2);
    let messages: Awaited<ReturnType<typeof drainQueue>> = [];
    for (const deadline = Date.now() + 20_000; messages.length === 0 && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 100));
      messages = await drainQueue(sinkName).catch(() => []);
    }
    expect(messages.map((m) => JSON.parse(m.content.toString()) as unknown)).toEqual([
      { type: "balance.changed", tenant: "t1", account_id: "a", balance_cents: 250, caused_by: "e-credit" },
    ]);
    // Durable, so that it keeps what arrives while nobody reads it, across broker restarts.
    expect(await withChannel(async (ch) => (await ch.checkQueue(sinkName)).queue)).toBe(sinkName);
    const doctor = await runRabbitInbox(["doctor"], { DATABASE_URL: databaseUrl });
    expect(doctor.stdout).toMatch(/^ok\s+outbox: nothing waiting to be published$/m);
  });
});
