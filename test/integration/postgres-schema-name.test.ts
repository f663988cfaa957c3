/**
 * A schema whose name looks like a parameter (`..._inbox$2`, legal in PostgreSQL once quoted):
 * the store's statements carry it as a quoted identifier, and the first statement of each
 * transaction is sent with its parameters inlined. Only real parameters may be replaced there:
 * a `$2` inside the identifier must stay text, or a tenant from a message ends up inside the SQL.
 * A real store, real claims, on PostgreSQL.
 */
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { InboxPipeline, type InboxHandler, type Logger } from "../../src/index.js";
import { type PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import { pgUrl, randomName } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

describe("PostgresStore in a schema named like a parameter", () => {
  it("claims, detects duplicates and conflicts, and stores the exact tenants", async () => {
    const schema = `${randomName("ri_test")}_inbox$2`;
    const quoted = `"${schema}"`;
    await admin((c) => c.query(`CREATE SCHEMA ${quoted}`));
    cleanups.push(() => admin((c) => c.query(`DROP SCHEMA IF EXISTS ${quoted} CASCADE`)));
    const store = await PostgresStore.connect(pgUrl, { schema, poolSize: 2 });
    cleanups.push(() => store.close());
    await store.migrate();
    await admin((c) => c.query(`CREATE TABLE ${quoted}.effects (tenant text NOT NULL, event_id text NOT NULL)`));

    const handler: InboxHandler<{ tenant: string; event_id: string }, PgClient> = {
      name: "schema$1",
      async handle(event, ctx) {
        await ctx.tx.query(`INSERT INTO ${quoted}.effects (tenant, event_id) VALUES ($1, $2)`, [ctx.key.tenant, ctx.key.eventId]);
      },
    };
    // A statement that failed would be retried the slow way and still apply: the proof that the
    // fast path held is that nothing failed at all.
    const problems: string[] = [];
    const note = (level: string) => (message: string, fields?: Record<string, unknown>) => { problems.push(`${level} ${message} ${JSON.stringify(fields)}`); };
    const logger: Logger = { debug: () => undefined, info: () => undefined, warn: note("warn"), error: note("error") };
    const hostileTenant = "t1'); DROP SCHEMA public; --";
    const message = (tenant: string, id: string, n = 1) => incomingMessage({ tenant, event_id: id, n });
    // Batched (the claim goes with BEGIN and a savepoint, inlined) and alone (a prepared statement).
    const pipeline = new InboxPipeline({ store, handler, logger });
    const first = await pipeline.process([message("t1", "e-1"), message(hostileTenant, "e-2"), message("t$2", "e-3")]);
    expect(first.map((o) => o.kind)).toEqual(["applied", "applied", "applied"]);
    const second = await pipeline.process([message("t1", "e-1")]);
    expect(second.map((o) => o.kind)).toEqual(["duplicate"]);
    const third = await pipeline.process([message("t$2", "e-3", 2)]);
    expect(third.map((o) => o.kind === "quarantined" && o.reason)).toEqual(["conflict"]);
    const fourth = await pipeline.process([message("t2", "e-4")]);
    expect(fourth.map((o) => o.kind)).toEqual(["applied"]);

    const rows = await admin(async (c) => ({
      dedup: (await c.query(`SELECT tenant, event_id FROM ${quoted}.rabbit_inbox_dedup WHERE handler = 'schema$1' ORDER BY event_id`)).rows,
      effects: (await c.query(`SELECT tenant, event_id FROM ${quoted}.effects ORDER BY event_id`)).rows,
      quarantine: (await c.query(`SELECT tenant, event_id, reason FROM ${quoted}.rabbit_inbox_quarantine`)).rows,
      publicTables: (await c.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'public'")).rows[0] as { n: number },
    }));
    const expected = [{ tenant: "t1", event_id: "e-1" }, { tenant: hostileTenant, event_id: "e-2" }, { tenant: "t$2", event_id: "e-3" }, { tenant: "t2", event_id: "e-4" }];
    expect(rows.dedup).toEqual(expected);
    expect(rows.effects).toEqual(expected);
    expect(rows.quarantine).toEqual([{ tenant: "t$2", event_id: "e-3", reason: "conflict" }]);
    expect(rows.publicTables.n).toBe(1);
    expect(problems.filter((p) => !p.includes("payload conflict"))).toEqual([]);
  });
});
