/**
 * Patroni (synchronous_mode) managing three PostgreSQL nodes, under a stream consumed by three
 * partitioned ledger replicas whose DATABASE_URL lists the three nodes
 * (`?target_session_attrs=read-write`). The leader's postmaster is killed with kill -9 mid-stream;
 * Patroni promotes the synchronous standby by itself, and the replicas find it: balances exact,
 * nothing quarantined, one dedup row per event, every balance.changed published with its stable
 * id, each account's changes in order. The failover gap is printed.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import { patroni } from "../support/ha-clusters.js";
import { HaLedgerRun } from "../support/ha-ledger.js";
import { accountIds, accountStories } from "../support/partitioned-ledger.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function onLeader<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: patroni.url(await patroni.leader()) });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

describe("Patroni: the leader's postmaster killed under three ledger replicas", () => {
  it("fails over by itself; the replicas follow the new leader, and nothing is lost, doubled, quarantined or reordered", async () => {
    await patroni.script("wait", "120");
    const database = `ri_ha_${randomBytes(4).toString("hex")}`;
    await onLeader((c) => c.query(`CREATE DATABASE ${database}`));
    cleanups.push(async () => {
      await patroni.script("wait", "120");
      await onLeader((c) => c.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`));
    });
    const run = new HaLedgerRun(() => patroni.urls(database));
    cleanups.push(() => run.close());
    await run.start();

    const accounts = accountIds(150);
    const stories = accountStories("t1", accounts, 15);
    const leaderBefore = await patroni.leader();
    let killedAt = 0;
    await run.publishStream(stories, 0.3, async () => {
      await patroni.script("kill", String(leaderBefore));
      killedAt = Date.now();
    });
    const leaderAfter = await waitUntil(async () => {
      const leader = await patroni.leader().catch(() => undefined);
      return leader !== undefined && leader !== leaderBefore ? leader : undefined;
    }, "Patroni to promote another node", { timeoutMs: 90_000, intervalMs: 500 });
    await run.finish(accounts.length * 5);
    const gapMs = run.gapAfter(killedAt);
    console.log(`patroni failover: leader pg${leaderBefore} killed, pg${leaderAfter} promoted; longest pause in balance.changed ${gapMs} ms`);

    await run.expectExact(accounts, stories.length, patroni.url(leaderAfter, database), patroni.urls(database));
    // Every replica followed the failover: it chose the new leader's node after losing the old one.
    for (const replica of run.replicas) {
      expect(replica.logs.some((r) => r.msg === "database node chosen" && r.node === `127.0.0.1:${5442 + leaderAfter}`)).toBe(true);
    }
    expect(gapMs).toBeGreaterThan(0);
    await patroni.script("wait", "120");
  });
});
