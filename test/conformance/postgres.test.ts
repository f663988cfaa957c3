import pg from "pg";
import { describe, expect, it } from "vitest";
import { TransientStoreError } from "../../src/core/errors.js";
import { type PgClient, PostgresExecutorStore, type PostgresExecutor, type PostgresStore } from "../../src/store/postgres/index.js";
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

describe("postgres claim racing a purge", () => {
  it("a key purged between the claim's INSERT and its read of the stored row is a retry, never a conflict with no stored version", async () => {
    const schema = await createPgSchema();
    const pool = new pg.Pool({ connectionString: schema.url, max: 2 });
    // A data layer of the smallest kind, whose statements a test can step in between: the claim
    // runs the same SQL through it as through PostgresStore, without the savepoint fast path.
    let beforeRead: (() => Promise<unknown>) | undefined;
    const executor: PostgresExecutor<pg.PoolClient> = {
      name: "test",
      async transaction(work) {
        const client = await pool.connect();
        try {
          await client.query("BEGIN");
          const result = await work(client);
          await client.query("COMMIT");
          return result;
        } catch (error) {
          await client.query("ROLLBACK");
          throw error;
        } finally {
          client.release();
        }
      },
      async query(text, values, tx) {
        // The claim's read of the rows its INSERT found already there.
        if (tx && beforeRead && /^SELECT d\.tenant, d\.event_id, d\.fingerprint FROM/.test(text)) {
          const step = beforeRead;
          beforeRead = undefined;
          await step();
        }
        return (tx ?? pool).query(text, [...values]);
      },
    };
    const store = new PostgresExecutorStore({ executor });
    try {
      await store.migrate();
      const claim = (claims: Array<[string, string]>) =>
        store.transaction((tx) => tx.claim("h", claims.map(([eventId, fingerprint]) => ({ key: { tenant: "t1", eventId }, fingerprint }))));
      expect(await claim([["e-1", "f1"], ["e-2", "f2"]])).toEqual([{ status: "claimed" }, { status: "claimed" }]);
      // Without the fast path, a batch meeting a stored key is told apart per key all the same.
      expect(await claim([["e-1", "f1"], ["e-3", "f3"]])).toEqual([{ status: "exists", fingerprint: "f1" }, { status: "claimed" }]);

      // A purge deletes e-2 (autocommit, another connection) after the claim's INSERT met its
      // row and before the claim reads it: neither claimed nor stored, so the transaction must
      // run again.
      beforeRead = () => pool.query("DELETE FROM rabbit_inbox_dedup WHERE handler = 'h' AND event_id = 'e-2'");
      const raced = await claim([["e-2", "other"]]).then(() => null, (error: unknown) => error);
      expect(raced).toBeInstanceOf(TransientStoreError);
      expect((raced as Error).message).toContain("inbox row vanished during claim");
      expect(beforeRead).toBeUndefined();
      expect(await store.countInbox("h", { tenant: "t1", eventId: "e-2" })).toBe(0);
      // Run again, it finds the key free.
      expect(await claim([["e-2", "other"]])).toEqual([{ status: "claimed" }]);
      expect(await store.countInbox("h")).toBe(3);
    } finally {
      await pool.end();
      await schema.drop();
    }
  });
});
