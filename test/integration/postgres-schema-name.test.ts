/**
 * A schema whose name looks like a parameter (`..._tenant$1`, legal in PostgreSQL once quoted):
 * every statement carries it as a quoted identifier. Under Knex and Drizzle the inbox's `$n`
 * statements are cut at their placeholders and given to the data layer in its own form: a `$1`
 * inside the identifier is text, and must stay text. The store's own pool, Knex and Drizzle run
 * the same real claims, duplicates and conflicts, with the handler's own SQL on that schema too.
 */
import { drizzle } from "drizzle-orm/node-postgres";
import knexFactory from "knex";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { drizzleStore, fromDrizzle } from "../../src/adapters/drizzle.js";
import { fromKnex, knexStore } from "../../src/adapters/knex.js";
import type { Store } from "../../src/core/store-contract/store.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { InboxHandler, Logger } from "../../src/index.js";
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

/** A store on the schema, and how its handler runs a `$n` statement in the handler's transaction. */
interface StoreInSchema {
  store: Store<unknown>;
  run(tx: unknown, text: string, values: unknown[]): Promise<unknown>;
  close(): Promise<void>;
}

const STORES: Record<string, (schema: string) => Promise<StoreInSchema>> = {
  PostgresStore: async (schema) => {
    const store = await PostgresStore.connect(pgUrl, { schema, poolSize: 2 });
    return { store, run: (tx, text, values) => (tx as PgClient).query(text, values), close: () => store.close() };
  },
  knexStore: (schema) => {
    const knex = knexFactory({ client: "pg", connection: pgUrl, pool: { min: 0, max: 2 } });
    const executor = fromKnex(knex);
    return Promise.resolve({
      store: knexStore(knex, { schema }) as Store<unknown>,
      run: (tx, text, values) => executor.query(text, values, tx as Parameters<typeof executor.query>[2]),
      close: () => knex.destroy(),
    });
  },
  drizzleStore: (schema) => {
    const pool = new pg.Pool({ connectionString: pgUrl, max: 2 });
    const db = drizzle(pool);
    const executor = fromDrizzle(db);
    return Promise.resolve({
      store: drizzleStore(db, { schema }),
      run: (tx, text, values) => executor.query(text, values, tx as Parameters<typeof executor.query>[2]),
      close: () => pool.end(),
    });
  },
};

describe.each(Object.keys(STORES))("%s in a schema named like a parameter", (name) => {
  it("migrates, claims, detects duplicates and conflicts, and stores the exact tenants", async () => {
    const schema = `${randomName("ri_test")}_tenant$1`;
    const quoted = `"${schema}"`;
    await admin((c) => c.query(`CREATE SCHEMA ${quoted}`));
    cleanups.push(() => admin((c) => c.query(`DROP SCHEMA IF EXISTS ${quoted} CASCADE`)));
    const layer = await STORES[name]!(schema);
    cleanups.push(() => layer.close());
    const store = layer.store;
    await store.migrate();
    await admin((c) => c.query(`CREATE TABLE ${quoted}.effects (tenant text NOT NULL, event_id text NOT NULL)`));

    const handler: InboxHandler<{ tenant: string; event_id: string }, unknown> = {
      name: "schema$1",
      async handle(_event, ctx) {
        await layer.run(ctx.tx, `INSERT INTO ${quoted}.effects (tenant, event_id) VALUES ($1, $2)`, [ctx.key.tenant, ctx.key.eventId]);
      },
    };
    // A statement that failed would be retried and still apply: the proof that every statement
    // ran as written is that nothing failed at all.
    const problems: string[] = [];
    const note = (level: string) => (message: string, fields?: Record<string, unknown>) => { problems.push(`${level} ${message} ${JSON.stringify(fields)}`); };
    const logger: Logger = { debug: () => undefined, info: () => undefined, warn: note("warn"), error: note("error") };
    const hostileTenant = "t1'); DROP SCHEMA public; --";
    const message = (tenant: string, id: string, n = 1) => incomingMessage({ tenant, event_id: id, n });
    // Batched (the claim of several keys) and alone (the claim of one).
    const pipeline = new InboxPipeline({ store, handler, logger });
    const first = await pipeline.process([message("t1", "e-1"), message(hostileTenant, "e-2"), message("t$1", "e-3")]);
    expect(first.map((o) => o.kind)).toEqual(["applied", "applied", "applied"]);
    const second = await pipeline.process([message("t1", "e-1")]);
    expect(second.map((o) => o.kind)).toEqual(["duplicate"]);
    const third = await pipeline.process([message("t$1", "e-3", 2)]);
    expect(third.map((o) => o.kind === "quarantined" && o.reason)).toEqual(["conflict"]);
    const fourth = await pipeline.process([message("t2", "e-4")]);
    expect(fourth.map((o) => o.kind)).toEqual(["applied"]);

    const rows = await admin(async (c) => ({
      dedup: (await c.query(`SELECT tenant, event_id FROM ${quoted}.rabbit_inbox_dedup WHERE handler = 'schema$1' ORDER BY event_id`)).rows,
      effects: (await c.query(`SELECT tenant, event_id FROM ${quoted}.effects ORDER BY event_id`)).rows,
      quarantine: (await c.query(`SELECT tenant, event_id, reason FROM ${quoted}.rabbit_inbox_quarantine`)).rows,
      publicTables: (await c.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'public'")).rows[0] as { n: number },
    }));
    const expected = [{ tenant: "t1", event_id: "e-1" }, { tenant: hostileTenant, event_id: "e-2" }, { tenant: "t$1", event_id: "e-3" }, { tenant: "t2", event_id: "e-4" }];
    expect(rows.dedup).toEqual(expected);
    expect(rows.effects).toEqual(expected);
    expect(rows.quarantine).toEqual([{ tenant: "t$1", event_id: "e-3", reason: "conflict" }]);
    expect(rows.publicTables.n).toBe(1);
    expect(problems.filter((p) => !p.includes("payload conflict"))).toEqual([]);
  });
});
