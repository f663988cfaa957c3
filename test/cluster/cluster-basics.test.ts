/**
 * The local 3-node cluster the failover tests run on: the nodes form one cluster, a quorum queue
 * declared through one node gets a replica on each, confirmed messages survive a kill -9 of the
 * node holding the queue's leader and are consumed through another node, and the killed node
 * comes back into the cluster and the queue when restarted.
 */
import { randomBytes } from "node:crypto";
import type amqp from "amqplib";
import { afterAll, expect, it } from "vitest";
import { amqpUrl } from "../support/broker.js";
import { type NodeNumber, cluster, killNode, restartNode } from "../support/cluster.js";

const queues: string[] = [];
afterAll(async () => {
  // Leave a whole cluster for the next file, whatever this one left behind.
  const running = await cluster.runningNodes();
  for (const node of cluster.nodes) if (!running.includes(node)) await restartNode(node);
  await cluster.deleteQueues(...queues);
});

/**
 * Consumes `count` messages through one node with manual acks and keeps the connection open
 * until the queue reports none left: acks are asynchronous, and a channel closed before the
 * queue has processed them gives the messages back.
 */
async function consumeAll(node: NodeNumber, queue: string, count: number, timeoutMs = 60_000): Promise<amqp.ConsumeMessage[]> {
  const connection = await cluster.connect(node);
  try {
    const channel = await connection.createChannel();
    await channel.prefetch(50);
    const received: amqp.ConsumeMessage[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${received.length} of ${count} messages arrived through node ${node}`)), timeoutMs);
      channel.consume(queue, (msg) => {
        if (!msg) return;
        received.push(msg);
        channel.ack(msg);
        if (received.length === count) {
          clearTimeout(timer);
          resolve();
        }
      }).catch(reject);
    });
    await cluster.waitForQuorumQueue(queue, (s) => s.messages === 0, timeoutMs, "every message acked");
    return received;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

it("three nodes form one cluster, each sees all three running", async () => {
  expect(await cluster.runningNodes()).toEqual([1, 2, 3]);
  for (const node of cluster.nodes) {
    expect(await cluster.clusterMembers(node)).toEqual([1, 2, 3]);
    expect(await cluster.clusterRunningNodes(node)).toEqual([1, 2, 3]);
  }
  // Not the system broker: each URL is a node of this cluster, on its own port (TEST_CLUSTER_PORT and the next two).
  const ports = cluster.urls.map((url) => Number(new URL(url).port));
  expect(ports).toEqual([cluster.basePort, cluster.basePort + 1, cluster.basePort + 2]);
  expect(ports).not.toContain(Number(new URL(amqpUrl).port || 5672));
});

it("a quorum queue survives kill -9 of its leader's node: every confirmed message consumed through another node, and the node rejoins on restart", async () => {
  const queue = `ri.test.cluster.${randomBytes(5).toString("hex")}`;
  queues.push(queue);
  await cluster.declareQuorumQueue(1, queue);
  const before = await cluster.waitForQuorumMembers(queue);
  expect(before.members).toEqual([1, 2, 3]);
  expect(before.online).toEqual([1, 2, 3]);

  const bodies = Array.from({ length: 50 }, (_, i) => JSON.stringify({ tenant: "t1", event_id: `e${i}` }));
  await cluster.publish(1, queue, bodies);
  const leader = before.leader!;
  const survivor = cluster.nodes.find((n) => n !== leader)!;

  await killNode(leader);
  expect(await cluster.runningNodes()).not.toContain(leader);
  // A new leader among the two nodes left, and the killed replica no longer online.
  const after = await cluster.waitForQuorumQueue(queue, (s) => s.leader !== undefined && s.leader !== leader && !s.online.includes(leader),
    60_000, "a new leader without the killed node");
  expect(after.members).toEqual([1, 2, 3]);
  expect(await cluster.clusterRunningNodes(survivor)).toEqual(cluster.nodes.filter((n) => n !== leader));

  const consumed = await consumeAll(survivor, queue, bodies.length);
  expect(consumed.map((m) => m.content.toString())).toEqual(bodies);
  // Published and confirmed before the crash, delivered for the first time after it.
  expect(consumed.filter((m) => m.fields.redelivered)).toEqual([]);
  // Nothing more than what was published: the queue is empty now.
  expect((await cluster.drain(survivor, queue)).map((m) => m.content.toString())).toEqual([]);

  await restartNode(leader);
  expect(await cluster.runningNodes()).toEqual([1, 2, 3]);
  expect(await cluster.clusterRunningNodes(leader)).toEqual([1, 2, 3]);
  expect(await cluster.clusterRunningNodes(survivor)).toEqual([1, 2, 3]);
  const rejoined = await cluster.waitForQuorumMembers(queue);
  expect(rejoined.online).toEqual([1, 2, 3]);
  // The restarted replica caught up with the acks: no message comes back through it.
  expect((await cluster.drain(leader, queue)).map((m) => m.content.toString())).toEqual([]);
  expect((await cluster.quorumQueue(queue))?.messages).toBe(0);
});

it("a node left outside the cluster (a run killed between its first boot and its join) is reset and joins on the next start", async () => {
  // Node 3 made a cluster of its own, forgotten by node 1: what a killed start leaves behind.
  await cluster.ctl(3, "-q", "stop_app");
  await cluster.ctl(1, "-q", "forget_cluster_node", cluster.nodeName(3));
  await cluster.ctl(3, "-q", "force_reset");
  await cluster.ctl(3, "-q", "start_app");
  // Node 2 still listed by node 1, but no longer counting itself in: the other half-formed state.
  await cluster.ctl(2, "-q", "stop_app");
  await cluster.ctl(2, "-q", "force_reset");
  await cluster.ctl(2, "-q", "start_app");
  expect(await cluster.clusterMembers(3)).toEqual([3]);
  expect(await cluster.clusterMembers(2)).toEqual([2]);
  expect(await cluster.runningNodes()).toEqual([1, 2, 3]);

  // Every VM runs, so a start that only launched stopped nodes would change nothing here.
  await cluster.start();
  for (const node of cluster.nodes) {
    expect(await cluster.clusterMembers(node)).toEqual([1, 2, 3]);
    expect(await cluster.clusterRunningNodes(node)).toEqual([1, 2, 3]);
  }
  for (const node of cluster.nodes) await cluster.waitForAmqp(node);
});
