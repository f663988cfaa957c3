/**
 * The outbox relay under load through a kill -9 of the broker node it publishes through, on the
 * 3-node cluster: a durable fanout exchange (the ledger's `<queue>.balance-changed`) bound to a
 * quorum queue whose leader is on that node. The relay reconnects to another node of its URL
 * list at once. A channel whose first publish to the queue comes before the cluster has
 * recorded the queue's new leader is refused (nacked) on every publish for as long as the dead
 * node stays down, while a new channel does fine once the leader is recorded. The relay must
 * open a new channel and drain the backlog while the node is still down, with every row
 * published at least once under its message id, each ordering key's messages in order, and no
 * row marked sent that the queue does not hold.
 */
import { randomBytes } from "node:crypto";
import type { GetMessage } from "amqplib";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { OutboxRelay } from "../../src/index.js";
import { brokerNodeLabel } from "../../src/amqp/broker-connection.js";
import { cluster, killNode, restartNode } from "../support/cluster.js";
import { type OutboxTableRow, type OutboxTestDatabase, type OutboxTestStore, createOutboxDatabase, eventually, sleep } from "../support/outbox.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";
import { TEST_DATABASES } from "../support/test-databases.js";

const ROWS = 4000;
const KEYS = 40;
const ROWS_PER_TRANSACTION = 50;
/** Pause between the writer's transactions: rows keep coming before, during and after the kill. */
const WRITE_PAUSE_MS = 30;
/**
 * From the kill to the last row marked sent. The relay notices the kill at once (the socket is
 * reset) and reconnects after `reconnectBaseDelayMs`; the new leader is recorded once node 3
 * resumes, at the relay's first refusal; the relay replaces a refused channel after the first
 * step of its reconnect backoff, doubling while refusals go on (at most `reconnectMaxDelayMs`),
 * and rows refused meanwhile are due again within `retryMaxDelayMs`. Those steps and the
 * backlog's own publishing fit several times over in the bound on a loaded machine. A relay
 * left on the refused channel drains nothing until the killed node returns, which this test
 * lets it do only after the bound.
 */
const DRAIN_BOUND_MS = 30_000;
/** The node the relay publishes through and the queue's leader; then the node it reconnects to (the next in its list), and the other. */
const VICTIM = 1;
const NEXT = 2;
const OTHER = 3;

const queues: string[] = [];
const exchanges: string[] = [];

/** Brings back a node a test killed, so that the next test (and file) has a whole cluster. */
async function restartStoppedNodes(): Promise<void> {
  const running = await cluster.runningNodes();
  for (const node of cluster.nodes) if (!running.includes(node)) await restartNode(node);
}

afterAll(async () => {
  await restartStoppedNodes();
  await cluster.deleteQueues(...queues.splice(0));
  await cluster.withChannel(1, async (ch) => { for (const e of exchanges.splice(0)) await ch.deleteExchange(e); });
});

describe.each(TEST_DATABASES)("outbox relay through a kill -9 of its broker node on %s", (kind) => {
  let db: OutboxTestDatabase | undefined;
  let store: OutboxTestStore | undefined;
  let relay: OutboxRelay | undefined;

  afterEach(async () => {
    await relay?.stop();
    relay = undefined;
    await store?.close();
    store = undefined;
    await db?.remove();
    db = undefined;
    await restartStoppedNodes();
  });

  it("drains the backlog through another node while the killed one is down: every row once or more, in key order, none marked sent unconfirmed", async () => {
    const name = `ri.test.relay-kill.${randomBytes(4).toString("hex")}`;
    const exchange = `${name}.balance-changed`;
    const sink = `${name}.sink`;
    queues.push(sink);
    exchanges.push(exchange);
    // Declared through the victim, the queue's leader is there (client-local placement).
    await cluster.declareQuorumQueue(VICTIM, sink);
    await cluster.withChannel(VICTIM, async (ch) => {
      await ch.assertExchange(exchange, "fanout", { durable: true });
      await ch.bindQueue(sink, exchange, "");
    });
    expect((await cluster.waitForQuorumMembers(sink)).leader).toBe(VICTIM);

    db = await createOutboxDatabase(kind);
    store = await db.open();
    await store.migrate();
    const lines: LogLine[] = [];
    relay = new OutboxRelay({
      url: [VICTIM, NEXT, OTHER].map((n) => cluster.url(n)),
      store, logger: recordingLogger(lines), pollIntervalMs: 50, cleanupIntervalMs: 0,
      reconnectBaseDelayMs: 50, reconnectMaxDelayMs: 2000, retryBaseDelayMs: 250, retryMaxDelayMs: 2000,
      topology: async (channel) => { await channel.assertExchange(exchange, "fanout", { durable: true }); },
    });
    await relay.start();
    expect((await relay.health()).node).toBe(brokerNodeLabel(cluster.url(VICTIM)));

    const writer = (async () => {
      for (let i = 0; i < ROWS; i += ROWS_PER_TRANSACTION) {
        await store.outbox.transaction(async (_tx, publish) => {
          for (let n = i; n < i + ROWS_PER_TRANSACTION; n++) {
            await publish(exchange, "", { n }, { orderingKey: `k-${n % KEYS}`, messageId: `${name}-${n}` });
          }
        });
        await sleep(WRITE_PAUSE_MS);
      }
    })();

    // Mid-stream: rows went out through the victim, and more are on their way.
    await eventually(() => (relay!.counts.published >= ROWS / 4 ? true : undefined), "a quarter of the rows published before the kill", 60_000);
    expect(relay.counts.published).toBeLessThan(ROWS / 2);
    // The relay must reach node 2 before the queue's new leader is recorded, as it does when
    // the election is slow under load; here every time: with node 3 frozen, node 2 alone cannot
    // elect one. Node 3 goes on at the relay's first refusal there.
    await cluster.pauseNode(OTHER);
    let killedAt: number;
    try {
      await killNode(VICTIM);
      killedAt = Date.now();
      await eventually(async () => ((await db!.rows()).some((r) => r.last_error?.includes("message nacked")) ? true : undefined),
        `the relay's publishes through node ${NEXT} refused while no leader is recorded`, 20_000).catch((error: unknown) => {
        throw new Error(`${String(error)}; the relay said: ${describeRelay(lines)}`, { cause: error });
      });
    } finally {
      await cluster.resumeNode(OTHER);
    }
    expect((await relay.health()).node).toBe(brokerNodeLabel(cluster.url(NEXT)));

    await writer;
    const sentAll = await eventually(async () => {
      const rows = await db!.rows();
      return rows.length === ROWS && rows.every((r) => r.sent) ? Date.now() : undefined;
    }, `every row marked sent within ${DRAIN_BOUND_MS} ms of the kill`, DRAIN_BOUND_MS + 5000).catch((error: unknown) => {
      throw new Error(`${String(error)}; ${relay!.counts.published} of ${ROWS} confirmed; the relay said: ${describeRelay(lines)}`, { cause: error });
    });
    expect(sentAll - killedAt).toBeLessThanOrEqual(DRAIN_BOUND_MS);
    // Drained while the killed node was down.
    expect(await cluster.runningNodes()).toEqual([NEXT, OTHER]);
    await relay.stop();
    relay = undefined;

    // It went on through a new channel on node 2, not through another reconnect (the stop
    // above wrote out the repeats the relay's log had held back).
    expect(logged(lines, "the broker refused a publish; the relay publishes on a new channel")[0]?.fields).toMatchObject({ node: brokerNodeLabel(cluster.url(NEXT)) });
    expect(logged(lines, "outbox relay lost its broker session; reconnecting").map((l) => l.fields.node)).toEqual([brokerNodeLabel(cluster.url(VICTIM))]);

    expectEveryRowInKeyOrder(await db.rows(), await cluster.drain(NEXT, sink), name);
  });
});

/**
 * What a queue holds: nothing but the rows, each with its own body; every row at least once, so
 * none was marked sent without the broker holding it; each key's messages, by first arrival, in
 * the order they were written.
 */
function expectEveryRowInKeyOrder(rows: readonly OutboxTableRow[], messages: readonly GetMessage[], name: string): void {
  const byMessageId = new Map(rows.map((r) => [r.message_id, r]));
  const received = messages.map((m) => ({ messageId: String(m.properties.messageId), body: m.content.toString("utf8") }));
  expect(received.filter((m) => !byMessageId.has(m.messageId))).toEqual([]);
  expect(received.filter((m) => m.body !== JSON.stringify({ n: Number(m.messageId.slice(name.length + 1)) }))).toEqual([]);
  const arrived = new Set(received.map((m) => m.messageId));
  expect(rows.filter((r) => !arrived.has(r.message_id)).map((r) => r.message_id)).toEqual([]);
  const firstArrivals = new Map<string, number[]>();
  for (const id of arrived) {
    const row = byMessageId.get(id)!;
    const list = firstArrivals.get(row.ordering_key!) ?? [];
    list.push(row.id);
    firstArrivals.set(row.ordering_key!, list);
  }
  expect(firstArrivals.size).toBe(KEYS);
  const outOfOrder = [...firstArrivals].filter(([, ids]) => ids.some((id, i) => i > 0 && id < ids[i - 1]!));
  expect(outOfOrder.map(([key]) => key)).toEqual([]);
}

/** What the relay logged at warn level and above, for a failure message. */
function describeRelay(lines: readonly LogLine[]): string {
  const notable = lines.filter((l) => l.level === "warn" || l.level === "error");
  const counts = new Map<string, number>();
  for (const l of notable) counts.set(l.message, (counts.get(l.message) ?? 0) + 1);
  const last = notable.at(-1);
  return `${JSON.stringify([...counts])}; last: ${last ? `${last.message} ${JSON.stringify(last.fields).slice(0, 400)}` : "none"}`;
}
