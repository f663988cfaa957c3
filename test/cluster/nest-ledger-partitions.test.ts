import { describe, expect, it } from "vitest";
import { BrokerClient } from "../../examples/ledger/driver/broker-client.js";
import type { LedgerProcess } from "../../examples/ledger/driver/ledger-process.js";
import { cluster } from "../support/cluster.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { accountIds, accountStories, expectStoriesAppliedInOrder, waitForApplied, waitForBalance } from "../support/partitioned-ledger.js";
import { onSelectedDatabases } from "../support/test-databases.js";

const PARTITIONS = 6;

/**
 * The Nest ledger's partitioned run: LEDGER_PARTITIONS through RabbitInboxModule's per-handler
 * settings, three replicas (three Nest applications) sharing the partitions evenly and applying
 * every account's events in order, and a replica stopped with SIGTERM handing its partitions
 * over within Nest's shutdown. It needs the consistent-hash plugin, enabled on the test cluster's
 * nodes (node 1 is enough: TEST_CLUSTER_NAME / TEST_CLUSTER_PORT may point at a one-node set).
 */
describe.each(onSelectedDatabases(["postgres" as const, "mysql" as const]))("partitioned Nest ledger (%s)", (kind) => {
  const t = useLedgerTest(kind, { amqpUrl: cluster.url(1), partitions: PARTITIONS, app: "nest" });

  it("three replicas share the partitions, apply each account's events in order, and a SIGTERM hands a replica's partitions over", async () => {
    const replicas: LedgerProcess[] = [];
    for (let i = 0; i < 3; i++) replicas.push(await t.start({ label: `nest replica ${i + 1}`, logLevel: "info", startTimeoutMs: 60_000 }));
    expect((await waitForBalance(replicas, PARTITIONS, 60_000)).map((h) => h.length)).toEqual([2, 2, 2]);

    const publisher = await BrokerClient.connect(cluster.url(1));
    try {
      const accounts = accountIds(120);
      const stories = accountStories("t1", accounts, 20);
      await publisher.publishRouted(t.queue, stories.slice(0, stories.length / 2));
      await waitForApplied(t, stories.length / 2, replicas);
      // One replica leaves mid-stream: Nest's shutdown stops its consumer, which hands over.
      const [leaving, ...staying] = replicas as [LedgerProcess, LedgerProcess, LedgerProcess];
      expect(await leaving.stop()).toEqual({ code: 0, signal: null });
      await waitForBalance(staying, PARTITIONS, 60_000);
      await publisher.publishRouted(t.queue, stories.slice(stories.length / 2));
      await waitForApplied(t, stories.length, staying);
      expect((await Promise.all(staying.map((r) => r.stop()))).map((s) => s.code)).toEqual([0, 0]);
      await expectStoriesAppliedInOrder(t, "t1", accounts);
      for (const r of replicas) expect(r.stoppedCounts()?.applied ?? 0).toBeGreaterThan(0);
    } finally {
      await publisher.close();
    }
  });
});
