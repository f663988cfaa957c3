/**
 * A PostgreSQL primary with a synchronous standby, and a consumer whose URL lists the standby
 * first (`?target_session_attrs=read-write`): it skips the standby and writes to the primary. The
 * primary is killed with kill -9 and the standby promoted seconds later, by hand (pg_ctl promote):
 * meanwhile every node refuses or is gone, the deliveries wait in the broker in order and the
 * health names the read-only standby; after the promotion the consumer writes to the new
 * primary, and every event is applied once, in order, nothing quarantined.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { InboxConsumer, type InboxHandler } from "../../src/index.js";
import type { Outcome } from "../../src/core/outcome.js";
import { PostgresStore, type PgClient } from "../../src/store/postgres/index.js";
import { deleteConsumerQueues, messagesReady, publishAll, waitFor } from "../support/broker.js";
import { haBroker, postgresPair } from "../support/ha-clusters.js";
import { type LogLine, collectingLogger } from "../support/sqlite-effects.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});
// The test leaves a promoted standby and a dead primary: the pair starts over for whoever comes next.
afterAll(async () => {
  await postgresPair.stop();
  await postgresPair.start();
});

async function sql(url: string, statement: string): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<Record<string, unknown>>(statement)).rows;
  } finally {
    await client.end();
  }
}

describe("a primary killed, its synchronous standby promoted by hand", () => {
  it("the consumer waits in order while no node takes writes, then writes to the promoted standby", async () => {
    const database = `ri_ha_${randomBytes(4).toString("hex")}`;
    await sql(postgresPair.url(1), `CREATE DATABASE ${database}`);
    await sql(postgresPair.url(1, database), "CREATE TABLE effects (seq bigserial PRIMARY KEY, event_id text NOT NULL)");
    // A synchronous commit waits for the standby's flush, not its replay: until the standby has
    // replayed the CREATE DATABASE, connecting to it there fails before it can say it is a standby.
    await waitFor(async () => (await sql(postgresPair.url(2), `SELECT 1 FROM pg_database WHERE datname = '${database}'`)).length === 1,
      10_000, "the standby to replay the new database");
    const lines: LogLine[] = [];
    const store = await PostgresStore.connect(`postgres://postgres@127.0.0.1:5442,127.0.0.1:5441/${database}?target_session_attrs=read-write`, { poolSize: 3, logger: collectingLogger(lines) });
    cleanups.push(() => store.close());
    await store.migrate();
    expect(lines.find((l) => l.message === "database node chosen")?.fields).toMatchObject({ node: "127.0.0.1:5441", skipped: ["127.0.0.1:5442 is a standby (in recovery)"] });

    const queue = `ri.test.standby.${randomBytes(5).toString("hex")}`;
    cleanups.push(() => deleteConsumerQueues(queue));
    const outcomes: Outcome[] = [];
    const handler: InboxHandler<{ tenant: string; event_id: string }, PgClient> = {
      name: "standby",
      async handle(event, ctx) { await ctx.tx.query("INSERT INTO effects (event_id) VALUES ($1)", [event.event_id]); },
    };
    const consumer = new InboxConsumer({
      url: haBroker.url(1), queue, store, handler, logger: collectingLogger(lines), batchSize: 5, prefetch: 50,
      retryDelaysMs: [100, 200], requeueDelayMs: 100, retry: { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 100, maxTotalMs: 500 },
      onOutcome: (o) => outcomes.push(o),
    });
    cleanups.push(() => consumer.stop());
    await consumer.start();
    const ids = Array.from({ length: 40 }, (_, i) => `e-${String(i + 1).padStart(2, "0")}`);
    const applied = async () => (await sql(postgresPair.url(2, database), "SELECT event_id FROM effects ORDER BY seq").catch(() => [])).map((r) => String(r.event_id));
    await publishAll(queue, ids.slice(0, 20).map((id) => ({ tenant: "t1", event_id: id })));
    await waitFor(async () => (await applied()).length === 20, 30_000, "the first 20 events applied (and streamed to the standby)");

    await postgresPair.script("kill", "1");
    const killedAt = Date.now();
    await publishAll(queue, ids.slice(20).map((id) => ({ tenant: "t1", event_id: id })));
    await waitFor(() => consumer.health().database?.problem?.reason === "read-only", 30_000, "the health to name the read-only standby");
    expect(consumer.health().database).toMatchObject({ available: false, node: "127.0.0.1:5442", problem: { code: "RI_STORE_UNAVAILABLE" } });
    expect(consumer.health().database!.problem!.message).toMatch(/127\.0\.0\.1:5442 is a standby \(in recovery\); 127\.0\.0\.1:5441 cannot connect/);
    // The failover takes a few seconds, as it would by hand or by an operator's script.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await postgresPair.script("promote", "2");
    await waitFor(async () => (await applied()).length === ids.length, 60_000, "every event applied on the promoted standby");
    const resumedAfterMs = Date.now() - killedAt;
    await waitFor(async () => (await messagesReady(queue)) === 0 && consumer.outcomeCounts.applied === ids.length, 30_000, "the queue drained");
    await consumer.stop();
    console.log(`postgres standby promoted by hand 3 s after the primary was killed: all events applied ${resumedAfterMs} ms after the kill`);

    expect(await applied()).toEqual(ids);
    expect(consumer.outcomeCounts).toMatchObject({ applied: ids.length, duplicate: 0, quarantined: 0, delayed: 0 });
    expect(outcomes.filter((o) => o.kind === "requeue").length).toBeGreaterThan(0);
    expect(await store.listQuarantine()).toEqual([]);
    expect(consumer.health().database).toMatchObject({ available: true, node: "127.0.0.1:5442", problem: null });
    expect(lines.filter((l) => l.message === "database node chosen").map((l) => l.fields.node)).toEqual(["127.0.0.1:5441", "127.0.0.1:5442"]);
  });
});
