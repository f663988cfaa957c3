import { describe, expect, it } from "vitest";
import { BrokerClient } from "../../examples/ledger/driver/broker-client.js";
import type { LedgerProcess } from "../../examples/ledger/driver/ledger-process.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import { brokerNodeLabel } from "../../src/amqp/broker-connection.js";
import { cluster, clusterUrls, killNode, restartNode } from "../support/cluster.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { accountIds, accountStories, expectStoriesAppliedInOrder, publishStream, waitForApplied, waitForBalance } from "../support/partitioned-ledger.js";

const CLUSTER_URLS = clusterUrls.join(",");
const nodeLabel = (node: number) => brokerNodeLabel(cluster.url(node));
const PARTITIONS = 6;

/**
 * The ledger's partitioned contract, exercised literally: LEDGER_PARTITIONS=P declares the
 * x-consistent-hash exchange `<LEDGER_QUEUE>` and the quorum queues `<LEDGER_QUEUE>.p0..p<P-1>`,
 * producers publish to the exchange with routing key `<tenant>/<account_id>`, and replicas share
 * the partitions evenly while every account's events apply in order.
 */
describe("partitioned ledger on a RabbitMQ cluster (postgres)", () => {
  const t = useLedgerTest("postgres", { amqpUrl: CLUSTER_URLS, partitions: PARTITIONS });

  async function startReplicas(count: number): Promise<LedgerProcess[]> {
    const replicas: LedgerProcess[] = [];
    for (let i = 0; i < count; i++) {
      replicas.push(await t.start({ label: `replica ${i + 1}`, logLevel: "info" }));
    }
    return replicas;
  }

  it("three replicas share the partitions evenly and apply every account's events in order", async () => {
    const replicas = await startReplicas(3);
    const held = await waitForBalance(replicas, PARTITIONS);
    expect(held.map((h) => h.length)).toEqual([2, 2, 2]);

    const publisher = await BrokerClient.connect(clusterUrls.at(-1));
    try {
      const accounts = accountIds(300);
      const stories = accountStories("t1", accounts, 50);
      await publisher.publishRouted(t.queue, stories);
      await waitForApplied(t, stories.length, replicas);
      expect((await Promise.all(replicas.map((r) => r.stop()))).map((s) => s.code)).toEqual([0, 0, 0]);
      await expectStoriesAppliedInOrder(t, "t1", accounts);
      // Every replica applied events: the load was shared, not taken by the first subscriber.
      for (const r of replicas) expect(r.stoppedCounts()?.applied ?? 0).toBeGreaterThan(0);
    } finally {
      await publisher.close();
    }
  });

  it("a replica killed mid-stream hands its partitions to the others, a stopped one hands them over cleanly, a joining one takes its share; order holds", async () => {
    const replicas = await startReplicas(3);
    await waitForBalance(replicas, PARTITIONS);
    const publisher = await BrokerClient.connect(clusterUrls.at(-1));
    try {
      const accounts = accountIds(600);
      const stories = accountStories("t1", accounts, 20);
      const { publishing, whenPublished } = publishStream(publisher, t.queue, stories);

      await whenPublished(0.25);
      const [killed, second, third] = replicas as [LedgerProcess, LedgerProcess, LedgerProcess];
      expect((await killed.kill("SIGKILL")).signal).toBe("SIGKILL");
      await waitForBalance([second, third], PARTITIONS);

      await whenPublished(0.5);
      const joined = await t.start({ label: "replica 4", logLevel: "info" });
      await waitForBalance([second, third, joined], PARTITIONS);

      await whenPublished(0.75);
      expect((await second.stop()).code).toBe(0);
      await waitForBalance([third, joined], PARTITIONS);

      await publishing;
      await waitForApplied(t, stories.length, [third, joined]);
      expect((await Promise.all([third.stop(), joined.stop()])).map((s) => s.code)).toEqual([0, 0]);
      await expectStoriesAppliedInOrder(t, "t1", accounts);
    } finally {
      await publisher.close();
    }
  });

  it("a SIGKILL of the broker node the replicas use, mid-stream: they go on through another node; the node restarts and rejoins; order holds", async () => {
    const replicas = await startReplicas(3);
    await waitForBalance(replicas, PARTITIONS);
    const used = new Set(replicas.map((r) => r.logs.find((l) => l.msg === "consuming")?.node));
    // Every replica took the first node of the list.
    expect([...used]).toEqual([nodeLabel(1)]);
    const publisher = await BrokerClient.connect(clusterUrls.at(-1));
    try {
      const accounts = accountIds(600);
      const stories = accountStories("t1", accounts, 20);
      const { publishing, whenPublished } = publishStream(publisher, t.queue, stories);
      await whenPublished(0.3);
      await killNode(1);
      // Each replica is back within seconds, through another node.
      for (const r of replicas) {
        await waitUntil(() => r.logs.find((l) => l.msg === "AMQP session restored" && l.node !== nodeLabel(1)), `${r.label} to reconnect through another node`, { timeoutMs: 30_000, watch: replicas });
      }
      await whenPublished(0.6, 90_000);
      await restartNode(1);
      await publishing;
      await waitForApplied(t, stories.length, replicas, 120_000);
      expect((await Promise.all(replicas.map((r) => r.stop()))).map((x) => x.code)).toEqual([0, 0, 0]);
      await expectStoriesAppliedInOrder(t, "t1", accounts);
    } finally {
      await publisher.close();
    }
  });
});
