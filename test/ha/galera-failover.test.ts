/**
 * A 3-node MariaDB Galera cluster (every node takes writes) under three partitioned ledger
 * replicas, each writing through its own node first (its DATABASE_URL lists the three nodes,
 * its own first):
 * - duplicates meet on different nodes: every account.opened is also sent to every partition,
 *   so replicas on different nodes claim the same event at about the same time (how often they
 *   meet, as certification failures or brute-force aborts, is printed);
 * - a node is killed with kill -9 mid-stream and restarted (it rejoins by IST): its replica moves
 *   to the next node of its list.
 * Balances exact, nothing quarantined, one dedup row per event, every balance.changed published
 * with its stable id, each account's changes in order; the failover gap is printed.
 * The same event claimed on two nodes with both COMMITs sent at once shows the certification
 * failure (wsrep_local_cert_failures) and its retry every time. And a cluster that refuses writes (read_only on every node) for longer than the delayed
 * retries: nothing quarantined or reordered.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import type { InboxHandler } from "../../src/index.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { type MysqlConnection, MysqlStore } from "../../src/store/mysql/index.js";
import { haBroker, galera } from "../support/ha-clusters.js";
import { HA_PARTITIONS, HaLedgerRun } from "../support/ha-ledger.js";
import { accountIds, accountStories } from "../support/partitioned-ledger.js";
import { incomingMessage } from "../support/messages.js";
import { refusedWritesScenario } from "../support/refusing-database.js";
import { type LogLine, collectingLogger } from "../support/sqlite-effects.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function ownDatabase(): Promise<string> {
  const database = `ri_ha_${randomBytes(4).toString("hex")}`;
  await galera.sql(1, `CREATE DATABASE ${database}`);
  cleanups.push(() => galera.sql(2, `DROP DATABASE IF EXISTS ${database}`));
  return database;
}

describe("Galera: duplicates on different nodes, and a node killed and restarted, under three ledger replicas", () => {
  it("duplicates that meet on different nodes end as duplicates; the killed node's replica moves to the next node; nothing lost, doubled, quarantined or reordered", async () => {
    const database = await ownDatabase();
    const run = new HaLedgerRun((replica) => galera.urls(replica, database));
    cleanups.push(() => run.close());
    cleanups.push(() => galera.restart(1));
    await run.start();

    const accounts = accountIds(150);
    const stories = accountStories("t1", accounts, 15);
    const openings = stories.filter((m) => m.type === "account.opened");
    const adjustments = stories.filter((m) => m.type === "balance.adjusted");

    // Every opening through its route, and a copy in every partition at the same time: the
    // replicas claim the same events on their own nodes at once.
    const before = await galera.conflicts();
    await Promise.all([
      run.publishStream(openings, 1, () => Promise.resolve()),
      ...Array.from({ length: HA_PARTITIONS }, (_, p) => run.publishToPartition(p, openings)),
    ]);
    await waitUntil(async () => (Number(await galera.sql(1, `SELECT COUNT(*) FROM ${database}.ledger_accounts`)) === accounts.length ? true : undefined),
      "every account opened", { timeoutMs: 60_000, intervalMs: 500, watch: run.replicas });
    const after = await galera.conflicts();
    const certFailures = after.certFailures - before.certFailures;
    const bfAborts = after.bfAborts - before.bfAborts;
    const retried = run.replicas.flatMap((r) => r.logs).filter((l) => l.msg === "transaction failed, retrying" && /1213|Deadlock/i.test(String(l.error))).length;
    // How often the copies met depends on timing; the test below makes them meet on purpose.
    console.log(`galera: duplicates met on different nodes: ${certFailures} certification failures (wsrep_local_cert_failures), ${bfAborts} brute-force aborts (wsrep_local_bf_aborts); ${retried} transactions retried after a 1213`);

    let killedAt = 0;
    await run.publishStream(adjustments, 0.3, async () => {
      await galera.script("kill", "1");
      killedAt = Date.now();
    });
    await galera.restart(1);
    await run.finish(adjustments.length);
    const gapMs = run.gapAfter(killedAt);
    console.log(`galera failover: node 1 killed (replica 1 moved on), restarted and synced; longest pause in balance.changed ${gapMs} ms`);

    await run.expectExact(accounts, stories.length, galera.url(2, database), galera.urls(2, database));
    const moved = run.replicas[0]!.logs.filter((r) => r.msg === "database node chosen").map((r) => r.node);
    expect(moved[0]).toBe("127.0.0.1:3311");
    expect(moved.slice(1)).toContain("127.0.0.1:3312");
  });
});

/**
 * Rounds of the same event claimed on two nodes at once. Each round meets (a retry after 1213);
 * whether the loser fails certification at COMMIT or is aborted by the winner's write set just
 * before depends on microseconds, so enough rounds are run for certification failures to show.
 */
const ROUNDS = 60;

describe("Galera: the same event claimed on two nodes at the same moment", () => {
  it("one commit wins; the other fails certification (1213), is retried, and finds a duplicate: applied once", async () => {
    const database = await ownDatabase();
    await galera.sql(1, `CREATE TABLE ${database}.effects (event_id VARCHAR(64) NOT NULL) ENGINE=InnoDB`);
    const stores = await Promise.all([1, 2].map((node) => MysqlStore.connect(galera.url(node, database), { poolSize: 2 })));
    for (const store of stores) cleanups.push(() => store.close());
    await stores[0]!.migrate();
    const lines: LogLine[] = [];
    // Both transactions wait for each other before COMMIT, so that both COMMITs go out at once:
    // Galera orders the two write sets, and the second fails certification on its node.
    let waiting: Array<() => void> = [];
    let round = -1;
    const arrived = new Set<string>();
    const barrier = (side: string) => async (point: string) => {
      if (point !== "before-commit" || arrived.has(`${round}/${side}`)) return;
      arrived.add(`${round}/${side}`);
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        if (waiting.length === 2) { for (const go of waiting) go(); waiting = []; }
        setTimeout(resolve, 2000);
      });
    };
    const pipelines = stores.map((store, i) => new InboxPipeline<{ tenant: string; event_id: string }, MysqlConnection>({
      store, logger: collectingLogger(lines), hook: barrier(String(i)), retry: { maxAttempts: 5, baseDelayMs: 5, maxDelayMs: 20 },
      handler: { name: "galera-meet", async handle(event, ctx) { await ctx.tx.execute("INSERT INTO effects (event_id) VALUES (?)", [event.event_id]); } },
    }));
    const before = await galera.conflicts();
    const kinds: string[] = [];
    for (round = 0; round < ROUNDS; round++) {
      const message = incomingMessage({ tenant: "t1", event_id: `meet-${round}` });
      const outcomes = await Promise.all(pipelines.map((p) => p.process([message])));
      kinds.push(outcomes.map(([o]) => o!.kind).sort().join("+"));
    }
    const after = await galera.conflicts();
    const retried = lines.filter((l) => l.message === "transaction failed, retrying" && /1213|Deadlock/i.test(String(l.fields.error))).length;
    console.log(`galera: ${ROUNDS} events claimed on two nodes at once: ${after.certFailures - before.certFailures} certification failures, ${after.bfAborts - before.bfAborts} brute-force aborts, ${retried} retries after a 1213`);
    expect(kinds).toEqual(Array.from({ length: ROUNDS }, () => "applied+duplicate"));
    expect(after.certFailures - before.certFailures).toBeGreaterThan(0);
    expect(retried).toBeGreaterThanOrEqual(after.certFailures - before.certFailures);
    expect((await galera.sql(2, `SELECT COUNT(*), COUNT(DISTINCT event_id) FROM ${database}.effects`)).split("\t")).toEqual([String(ROUNDS), String(ROUNDS)]);
  });
});

describe("Galera: every node read-only for longer than the delayed retries", () => {
  it("gives the deliveries back in order, never delays or quarantines them, and applies each once when writable", async () => {
    const database = await ownDatabase();
    await galera.sql(1, `CREATE TABLE ${database}.effects (seq BIGINT AUTO_INCREMENT PRIMARY KEY, event_id VARCHAR(64) NOT NULL) ENGINE=InnoDB`);
    const store = await MysqlStore.connect(galera.urls(1, database), { poolSize: 3 });
    cleanups.push(() => store.close());
    await store.migrate();
    const readOnly = async (on: boolean) => {
      for (const node of galera.nodes) await galera.sql(node, `SET GLOBAL read_only = ${on ? 1 : 0}`);
    };
    cleanups.push(() => readOnly(false));
    const handler: InboxHandler<{ tenant: string; event_id: string }, unknown> = {
      name: "refused",
      async handle(event, ctx) {
        await (ctx.tx as { execute(sql: string, values: unknown[]): Promise<unknown> }).execute("INSERT INTO effects (event_id) VALUES (?)", [event.event_id]);
      },
    };
    await refusedWritesScenario({
      store: store, handler, node: "127.0.0.1:3311", reason: "read-only", refusesEveryWrite: true,
      refusalMessage: /^(MySQL 127\.0\.0\.1:3311 refuses work \(read-only, 1290\)|no MySQL node fits target_session_attrs=read-write: 127\.0\.0\.1:3311 is read-only \(@@read_only = 1\))/,
      refuse: readOnly,
      applied: async () => (await galera.sql(2, `SELECT event_id FROM ${database}.effects ORDER BY seq`)).split("\n").filter((l) => l !== ""),
    }, haBroker.url(1), cleanups);
  });
});
