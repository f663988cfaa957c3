import pg from "pg";
import { describe, expect, it } from "vitest";
import type { PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import { createPgSchema, openPostgresStore, pgUrl } from "../support/databases.js";
import { describeStoreConformance } from "./store-conformance.js";

describeStoreConformance<PgClient>(
  "postgres",
  async () => {
    const schema = await createPgSchema();
    const stores: PostgresStore[] = [];
    const open = async () => {
      const store = await openPostgresStore(schema.url);
      stores.push(store);
      return store;
    };
    const store = await open();
    return {
      store,
      openPeer: open,
      createBusinessTable: () => store.transaction(async (tx) => {
        await tx.handle.query("CREATE TABLE conformance_counters (account text PRIMARY KEY, value bigint NOT NULL CHECK (value >= 0))");
      }),
      cleanup: async () => {
        for (const s of stores) await s.close();
        await schema.drop();
      },
    };
  },
  {
    concurrentStores: 5,
    rowLocks: true,
    business: {
      add: async (c, account, delta) => {
        await c.query(
          `INSERT INTO conformance_counters (account, value) VALUES ($1, $2)
           ON CONFLICT (account) DO UPDATE SET value = conformance_counters.value + EXCLUDED.value`,
          [account, delta],
        );
      },
      read: async (c, account) => {
        const { rows } = await c.query("SELECT value FROM conformance_counters WHERE account = $1", [account]);
        return rows.length === 0 ? null : Number(rows[0]!.value);
      },
      count: async (c, sql) => Number((await c.query(sql)).rows[0]!.n),
    },
  },
);

describe("postgres test harness", () => {
  it("a schema's connection string sets search_path, so the store's tables land in that schema", async () => {
    const schema = await createPgSchema();
    try {
      const client = new pg.Client({ connectionString: schema.url });
      await client.connect();
      try {
        expect((await client.query("SELECT current_schema() AS s")).rows[0].s).toBe(schema.schema);
      } finally {
        await client.end();
      }
      const store = await openPostgresStore(schema.url);
      await store.migrate();
      await store.close();
      const admin = new pg.Client({ connectionString: pgUrl });
      await admin.connect();
      try {
        const { rows } = await admin.query("SELECT table_schema FROM information_schema.tables WHERE table_name = 'rabbit_inbox_dedup' AND table_schema = $1", [schema.schema]);
        expect(rows).toHaveLength(1);
      } finally {
        await admin.end();
      }
    } finally {
      await schema.drop();
    }
    const check = new pg.Client({ connectionString: pgUrl });
    await check.connect();
    try {
      expect((await check.query("SELECT 1 FROM information_schema.schemata WHERE schema_name = $1", [schema.schema])).rows).toHaveLength(0);
    } finally {
      await check.end();
    }
  });
});
