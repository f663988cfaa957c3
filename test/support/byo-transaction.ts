/**
 * The bring-your-own-transaction suite: what every data-layer adapter (Kysely, Knex, Drizzle,
 * Prisma) must prove on the real PostgreSQL, through the real InboxPipeline and, once, the real
 * InboxConsumer and broker. Each adapter's test file opens its data layer on a fresh schema and
 * calls `describeByoTransaction`; the store conformance suite runs on the same adapter too.
 *
 * Business writes go through the data layer's own query builder or model API (`credit`), never
 * through the inbox: that the inbox record and those writes commit or roll back together is the
 * point of the adapter.
 */
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CommitOutcomeUnknownError } from "../../src/index.js";
import type { Store } from "../../src/core/store-contract/store.js";
import { PostgresExecutorStore, PostgresStore, type PostgresExecutor } from "../../src/store/postgres/index.js";
import { describeStoreConformance } from "../conformance/store-conformance.js";
import { type ByoCaseContext, byoSharedCases, creditEvent, creditHandler, pipelineOn } from "./byo-cases.js";
import { type TestPgSchema, createPgSchema } from "./databases.js";
import { incomingMessage } from "./messages.js";

/** One data layer opened on a schema: the adapter's store and executor on it, and a business write. */
export interface ByoDataLayer<Tx> {
  /** The adapter's store factory on this data layer (`kyselyStore(db)`...), not migrated. */
  store: Store<Tx>;
  /** The adapter's executor on the same data layer (`fromKysely(db)`...). */
  executor: PostgresExecutor<Tx>;
  /** `byo_accounts.balance_cents += delta` (row created at `delta`), through the data layer's query builder or model API. */
  credit(tx: Tx, account: string, delta: number): Promise<void>;
  /** Ends the data layer's pool. */
  close(): Promise<void>;
}

/** Opens the data layer on `url` (whose search_path is `schema`). */
export type OpenDataLayer<Tx> = (url: string, schema: string) => Promise<ByoDataLayer<Tx>>;

async function withAdmin<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export function describeByoTransaction<Tx>(name: string, open: OpenDataLayer<Tx>): void {
  // Given a transaction, an adapter's executor runs the statement on that transaction alone
  // (its data-layer instance is only used without one): any executor of the adapter will do.
  let executor: PostgresExecutor<Tx> | undefined;
  const inTransaction = (tx: Tx, text: string, values: unknown[] = []) => executor!.query(text, values, tx);

  describeStoreConformance<Tx>(
    `${name} (bring your own transaction)`,
    async () => {
      const schema = await createPgSchema();
      const layers: Array<ByoDataLayer<Tx>> = [];
      const openLayer = async () => {
        const layer = await open(schema.url, schema.schema);
        executor = layer.executor;
        layers.push(layer);
        return layer;
      };
      const first = await openLayer();
      let operator: PostgresStore | undefined;
      return {
        store: first.store,
        openPeer: async () => (await openLayer()).store,
        // The adapters have no operations() by design: the operator's PostgresStore on the same tables.
        operations: async () => {
          operator ??= await PostgresStore.connect(schema.url);
          return operator.operations();
        },
        createBusinessTable: () => withAdmin(schema.url, (c) => c.query(
          "CREATE TABLE conformance_counters (account text PRIMARY KEY, value bigint NOT NULL CHECK (value >= 0))",
        )).then(() => undefined),
        cleanup: async () => {
          for (const layer of layers) await layer.close();
          await operator?.close();
          await schema.drop();
        },
      };
    },
    {
      concurrentStores: 5,
      rowLocks: true,
      // The conformance suite's business SQL, run through the data layer's transaction: the
      // same connection and transaction the inbox record is written on.
      business: {
        add: async (tx, account, delta) => {
          await inTransaction(tx,
            `INSERT INTO conformance_counters (account, value) VALUES ($1, $2)
             ON CONFLICT (account) DO UPDATE SET value = conformance_counters.value + EXCLUDED.value`,
            [account, delta]);
        },
        read: async (tx, account) => {
          const { rows } = await inTransaction(tx, "SELECT value FROM conformance_counters WHERE account = $1", [account]);
          return rows.length === 0 ? null : Number(rows[0]!.value);
        },
        count: async (tx, sql) => Number((await inTransaction(tx, sql)).rows[0]!.n),
      },
    },
  );

  describe(`bring your own transaction: ${name}`, () => {
    let schema: TestPgSchema;
    let layer: ByoDataLayer<Tx>;
    let store: Store<Tx>;
    const cleanups: Array<() => Promise<unknown>> = [];

    beforeEach(async () => {
      schema = await createPgSchema();
      layer = await open(schema.url, schema.schema);
      store = layer.store;
      await store.migrate();
      await withAdmin(schema.url, (c) => c.query("CREATE TABLE byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)"));
    });

    afterEach(async () => {
      for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
      await layer.close();
      await schema.drop();
    });

    const balance = (account: string) => withAdmin(schema.url, async (c) => {
      const { rows } = await c.query("SELECT balance_cents FROM byo_accounts WHERE id = $1", [account]);
      return rows.length === 0 ? null : Number(rows[0].balance_cents);
    });
    const outboxRows = () => withAdmin(schema.url, async (c) => (await c.query("SELECT message_id FROM rabbit_inbox_outbox ORDER BY id")).rows.length);

    const cases: ByoCaseContext<Tx> = {
      name, queuePrefix: "ri.test.byo", cleanups, balance, outboxRows,
      store: () => store,
      credit: (tx, account, delta) => layer.credit(tx, account, delta),
    };

    byoSharedCases(cases);

    it("a handler that swallows an SQL error gets nothing applied (the data layer's COMMIT would have been a ROLLBACK)", async () => {
      const handler = creditHandler(cases, {
        afterWrite: async (_event, tx) => {
          await layer.executor.query("SELECT 1 / 0", [], tx).catch(() => undefined);
        },
      });
      const [outcome] = await pipelineOn(handler, store).process([incomingMessage(creditEvent("e-1", "a", 100))]);
      expect(outcome!.kind === "quarantined" && outcome!.reason).toBe("retries_exhausted");
      expect(outcome!.kind === "quarantined" && outcome!.detail).toContain("aborted");
      expect(await balance("a")).toBeNull();
      expect(await store.countInbox(handler.name)).toBe(0);
    });

    it("a session lost at the data layer's COMMIT is CommitOutcomeUnknownError: not acked, and the redelivery applies once", async () => {
      // The data layer's real COMMIT runs on a session terminated just before it is sent.
      const executor = layer.executor;
      const killer: PostgresExecutor<Tx> = {
        ...executor,
        transaction: (work) => executor.transaction(async (tx) => {
          const result = await work(tx);
          const { rows } = await executor.query("SELECT pg_backend_pid() AS pid", [], tx);
          const pid = Number(rows[0]!.pid);
          await withAdmin(schema.url, async (c) => {
            await c.query("SELECT pg_terminate_backend($1)", [pid]);
            for (let i = 0; i < 100 && (await c.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).rows.length > 0; i++) {
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
          });
          await new Promise((resolve) => setTimeout(resolve, 50)); // let the client see its socket close
          return result;
        }),
      };
      const handler = creditHandler(cases);
      const [lost] = await pipelineOn(handler, new PostgresExecutorStore({ executor: killer })).process([incomingMessage(creditEvent("e-1", "a", 100))]);
      expect(lost!.kind).toBe("requeue");
      expect(lost!.kind === "requeue" && lost!.error).toBeInstanceOf(CommitOutcomeUnknownError);
      // The broker redelivers; the dedup record decides. Here the COMMIT never reached the server.
      const [again] = await pipelineOn(handler, store).process([incomingMessage(creditEvent("e-1", "a", 100), { redelivered: true })]);
      expect(again!.kind).toBe("applied");
      const [third] = await pipelineOn(handler, store).process([incomingMessage(creditEvent("e-1", "a", 100), { redelivered: true })]);
      expect(third!.kind).toBe("duplicate");
      expect(await balance("a")).toBe(100);
    });

    it("shares migrations with PostgresStore: either runs first, the other has nothing left to do", async () => {
      const versions = () => withAdmin(schema.url, async (c) => (await c.query("SELECT version FROM rabbit_inbox_migrations ORDER BY version")).rows.map((r) => Number(r.version)));
      const before = await versions();
      expect(before.length).toBeGreaterThanOrEqual(3);
      const pgStore = await PostgresStore.connect(schema.url);
      try {
        await pgStore.migrate();
        // A record written through the data layer is seen by PostgresStore, and the reverse.
        await pipelineOn(creditHandler(cases), store).process([incomingMessage(creditEvent("e-1", "a", 1))]);
        expect(await pgStore.countInbox(`byo-${name}`)).toBe(1);
      } finally {
        await pgStore.close();
      }
      await store.migrate();
      expect(await versions()).toEqual(before);
    });
  });
}
