/**
 * The Nest ledger (`npm run start:nest`: RabbitInboxModule, TypeORM) keeps the ledger's contract
 * as real processes against the real broker and databases: a kill -9 between commit and ack, a
 * conflict, a malformed message, balance.changed through the outbox with one message id per
 * change, the ledger's own commands reading its database, SIGTERM draining to exit 0, and
 * /readyz turning 503 while the broker is cut.
 */
import { afterEach, describe, expect, it } from "vitest";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { outboxMessageId } from "../../src/index.js";
import { amqpUrl, waitFor } from "../support/broker.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { ExchangeTap, sleep } from "../support/outbox.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { TEST_DATABASES, onSelectedDatabases } from "../support/test-databases.js";

// TypeORM runs the Nest ledger on the server databases only.
const SERVER_DATABASES = onSelectedDatabases(TEST_DATABASES.filter((kind) => kind !== "sqlite"));

describe.each(SERVER_DATABASES)("the Nest ledger on %s", (kind) => {
  const t = useLedgerTest(kind, { app: "nest" });
  const taps: ExchangeTap[] = [];
  afterEach(async () => {
    for (const tap of taps.splice(0)) await tap.close({ deleteExchange: true });
  });

  async function tapBalanceChanged(): Promise<ExchangeTap> {
    const tap = await ExchangeTap.open(`${t.queue}.balance-changed`);
    taps.push(tap);
    return tap;
  }

  it("after-commit:pause, kill -9, restart: the redelivery is a duplicate, the balance unchanged, balance.changed has one message id", async () => {
    const tap = await tapBalanceChanged();
    const first = await t.start({ fault: "after-commit:pause:2" });
    await t.broker.publish(t.queue, [accountOpened("t1", "e-open", "a")]);
    await first.waitForSettled(1);
    await t.broker.publish(t.queue, [balanceAdjusted("t1", "e-credit", "a", 100)]);
    expect(await first.waitForPause()).toEqual({ point: "after-commit", eventId: "e-credit" });
    expect(await first.kill("SIGKILL")).toEqual({ code: null, signal: "SIGKILL" });

    // Committed, never acked: the balance moved once and the broker holds the delivery again.
    expect((await t.tables()).accounts).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 100 }]);
    expect(await t.depth()).toBe(1);

    const second = await t.start();
    await second.waitForSettled(1);
    await tap.waitForCount(1);
    await sleep(500); // a second copy, if one were sent, arrives by then
    expect(await t.stopWhenIdle([second])).toEqual([{ code: 0, signal: null }]);
    expect(second.redeliveries()).toEqual([{ tenant: "t1", eventId: "e-credit", outcome: "duplicate" }]);
    expect(second.stoppedCounts()).toEqual({ applied: 0, duplicate: 1, quarantined: 0, delayed: 0, requeue: 0 });

    const { balances, quarantine } = await t.cli();
    expect(balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 100 }]);
    expect(quarantine).toEqual([]);
    expect(await t.depth()).toBe(0);
    // Sent by the first process's relay or re-sent by the second on the duplicate: the same id either way.
    const ids = new Set(tap.messages.map((m) => m.messageId));
    expect([...ids]).toEqual([outboxMessageId({ tenant: "t1", handler: "ledger", eventId: "e-credit" }, 0)]);
    expect(tap.messages[0]!.json).toEqual({ type: "balance.changed", tenant: "t1", account_id: "a", balance_cents: 100, caused_by: "e-credit" });
    expect(tap.messages[0]!.deliveryMode).toBe(2);
  });

  it("quarantines a conflict and a malformed message with the ledger's reasons, applies the rest once, and drains on SIGTERM", async () => {
    const ledger = await t.start();
    await t.broker.publish(t.queue, [accountOpened("t1", "e-open", "a")]);
    await ledger.waitForSettled(1);
    await t.broker.publish(t.queue, [
      balanceAdjusted("t1", "e-2", "a", 5),
      balanceAdjusted("t1", "e-2", "a", 5), // a producer's retry: a duplicate
      balanceAdjusted("t1", "e-2", "a", 7), // same id, other payload: a conflict
      "{ not json",
      { type: "balance.adjusted", tenant: "t1", event_id: "e-3", account_id: "a", delta_cents: 1.5 },
    ]);
    await ledger.waitForSettled(6);
    expect(await t.stopWhenIdle([ledger])).toEqual([{ code: 0, signal: null }]);
    expect(ledger.stoppedCounts()).toEqual({ applied: 2, duplicate: 1, quarantined: 3, delayed: 0, requeue: 0 });

    const { balances, quarantine } = await t.cli();
    expect(balances).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 5 }]);
    // In the order each database wrote them: compared as a set.
    expect(quarantine.map((q) => `${q.tenant}/${q.event_id}/${q.reason}`).sort()).toEqual(["null/null/invalid", "t1/e-2/conflict", "t1/e-3/invalid"]);
    expect(await t.depth(t.quarantineQueue)).toBe(3);
  });
});

describe.each(onSelectedDatabases(["postgres" as const]))("the Nest ledger partitioned on a broker without the consistent-hash plugin (%s)", (kind) => {
  const t = useLedgerTest(kind, { app: "nest", partitions: 2 });

  it("fails its bootstrap, exits 1 naming the plugin, and declares no partition queue", async () => {
    const error = await t.start({ logLevel: "info" }).then(() => undefined, (e: unknown) => e as Error);
    expect(error).toBeInstanceOf(Error);
    expect(error!.message).toMatch(/exited \(code 1\)/);
    expect(error!.message).toMatch(/rabbitmq-plugins enable rabbitmq_consistent_hash_exchange/);
    for (const queue of [`${t.queue}.p0`, `${t.queue}.p1`]) await expect(t.broker.queueState(queue)).rejects.toThrow(/NOT_FOUND/);
  });
});

describe.each(onSelectedDatabases(["postgres" as const]))("the Nest ledger's /readyz (%s)", (kind) => {
  const t = useLedgerTest(kind, { app: "nest" });
  const proxies: TcpProxy[] = [];
  afterEach(async () => {
    for (const proxy of proxies.splice(0)) await proxy.stop();
  });

  it("is 200 while connected and consuming, 503 naming the inbox while the broker is cut, 200 again once it is back", async () => {
    const broker = new URL(amqpUrl);
    const proxy = new TcpProxy({ host: broker.hostname, port: Number(broker.port || 5672) });
    proxies.push(proxy);
    await proxy.start();
    broker.port = String(proxy.port);
    const ledger = await t.start({ amqpUrl: broker.toString(), metricsPort: 0, logLevel: "info" });
    const base = ledger.metricsUrl!;
    const readyz = async () => {
      const response = await fetch(`${base}/readyz`);
      return { status: response.status, body: (await response.json()) as { details: Record<string, { status: string }> } };
    };
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const up = await readyz();
    expect(up.status).toBe(200);
    expect(up.body.details).toMatchObject({ inbox: { status: "up" }, database: { status: "up" } });

    await proxy.stop();
    let down = await readyz();
    await waitFor(async () => (down = await readyz()).status === 503, 30_000, "/readyz to answer 503");
    expect(down.body.details).toMatchObject({ inbox: { status: "down" }, database: { status: "up" } });
    expect((await fetch(`${base}/healthz`)).status).toBe(200);

    await proxy.start();
    await waitFor(async () => (await readyz()).status === 200, 60_000, "/readyz to answer 200 again");
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain("rabbit_inbox_messages_total");
    expect(await ledger.stop()).toEqual({ code: 0, signal: null });
  });
});
