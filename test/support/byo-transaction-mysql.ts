/**
 * The bring-your-own-transaction suite on MySQL / MariaDB: what every data-layer adapter
 * (Kysely, Knex, Drizzle, Prisma) must prove there, on the real MariaDB, through the real
 * InboxPipeline and, once, the real InboxConsumer and broker. Each adapter's test file opens its
 * data layer on a fresh database (dropped after the test) and calls
 * `describeByoTransactionMysql`; the store conformance suite runs on the same adapter too.
 *
 * Business writes go through the data layer's own query builder or model API (`credit`), never
 * through the inbox: that the inbox record and those writes commit or roll back together is the
 * point of the adapter.
 */
import mysql from "mysql2/promise";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CommitOutcomeUnknownError, TransientStoreError } from "../../src/index.js";
import type { Store } from "../../src/core/store-contract/store.js";
import { MysqlExecutorStore, MysqlStore } from "../../src/store/mysql/index.js";
import type { SqlExecutor } from "../../src/store/sql/executor-driver.js";
import { describeStoreConformance } from "../conformance/store-conformance.js";
import { type ByoCaseContext, byoSharedCases, creditEvent, creditHandler, pipelineOn } from "./byo-cases.js";
import { type TestMysqlDatabase, createMysqlDatabase } from "./databases.js";
import { incomingMessage } from "./messages.js";

/** One data layer opened on a MySQL database: the adapter's store and executor on it, and a business write. */
export interface ByoMysqlDataLayer<Tx> {
  /** The adapter's store factory on this data layer (`kyselyStore(db)`...), not migrated. */
  store: Store<Tx>;
  /** The adapter's MySQL executor on the same data layer (`fromKyselyMysql(db)`...). */
  executor: SqlExecutor<Tx>;
  /** `byo_accounts.balance_cents += delta` (row created at `delta`), through the data layer's query builder or model API. */
  credit(tx: Tx, account: string, delta: number): Promise<void>;
  /** Ends the data layer's pool. */
  close(): Promise<void>;
}

/** Opens the data layer on `url` (whose path is `database`). */
export type OpenMysqlDataLayer<Tx> = (url: string, database: string) => Promise<ByoMysqlDataLayer<Tx>>;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function withAdmin<T>(url: string, work: (connection: mysql.Connection) => Promise<T>): Promise<T> {
  const connection = await mysql.createConnection(url);
  try {
    return await work(connection);
  } finally {
    await connection.end();
  }
}

type Rows = Array<Record<string, unknown>>;


/** The accounts table the handlers credit; a binary collation so that ids compare exactly. */
const ACCOUNTS_TABLE = `CREATE TABLE byo_accounts (
  id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, balance_cents BIGINT NOT NULL) ENGINE=InnoDB`;

export function describeByoTransactionMysql<Tx>(name: string, open: OpenMysqlDataLayer<Tx>): void {
  // Given a transaction, an adapter's executor runs the statement on that transaction alone
  // (its data-layer instance is only used without one): any executor of the adapter will do.
  let executor: SqlExecutor<Tx> | undefined;
  const inTransaction = (tx: Tx, text: string, values: unknown[] = []) => executor!.query(text, values, tx);

  describeStoreConformance<Tx>(
    `${name} on MySQL (bring your own transaction)`,
    async () => {
      const db = await createMysqlDatabase();
      const layers: Array<ByoMysqlDataLayer<Tx>> = [];
      const openLayer = async () => {
        const layer = await open(db.url, db.database);
        executor = layer.executor;
        layers.push(layer);
        return layer;
      };
      const first = await openLayer();
      let operator: MysqlStore | undefined;
      return {
        store: first.store,
        openPeer: async () => (await openLayer()).store,
        // The adapters have no operations() by design: the operator's MysqlStore on the same tables.
        operations: async () => {
          operator ??= await MysqlStore.connect(db.url);
          return operator.operations();
        },
        // DDL commits implicitly on MySQL: on a connection of its own, never in an inbox transaction.
        createBusinessTable: () => withAdmin(db.url, (c) => c.query(
          `CREATE TABLE conformance_counters (
             account VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY,
             value BIGINT NOT NULL,
             CHECK (value >= 0)
           ) ENGINE=InnoDB`,
        )).then(() => undefined),
        cleanup: async () => {
          for (const layer of layers) await layer.close();
          await operator?.close();
          await db.drop();
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
            "INSERT INTO conformance_counters (account, value) VALUES (?, ?) ON DUPLICATE KEY UPDATE value = value + VALUES(value)",
            [account, delta]);
        },
        read: async (tx, account) => {
          const { rows } = await inTransaction(tx, "SELECT CAST(value AS CHAR) AS value FROM conformance_counters WHERE account = ?", [account]);
          return rows.length === 0 ? null : Number(rows[0]!.value);
        },
        count: async (tx, sql) => Number((await inTransaction(tx, sql)).rows[0]!.n),
      },
    },
  );

  describe(`bring your own transaction on MySQL: ${name}`, () => {
    let db: TestMysqlDatabase;
    let layer: ByoMysqlDataLayer<Tx>;
    let store: Store<Tx>;
    const cleanups: Array<() => Promise<unknown>> = [];

    beforeEach(async () => {
      db = await createMysqlDatabase();
      layer = await open(db.url, db.database);
      store = layer.store;
      await store.migrate();
      await withAdmin(db.url, (c) => c.query(ACCOUNTS_TABLE));
    });

    afterEach(async () => {
      for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
      await layer.close();
      await db.drop();
    });

    const balance = (account: string) => withAdmin(db.url, async (c) => {
      const [rows] = await c.query("SELECT CAST(balance_cents AS CHAR) AS balance FROM byo_accounts WHERE id = ?", [account]);
      return (rows as Rows).length === 0 ? null : Number((rows as Rows)[0]!.balance);
    });
    const outboxRows = () => withAdmin(db.url, async (c) => ((await c.query("SELECT message_id FROM rabbit_inbox_outbox ORDER BY id"))[0] as Rows).length);

    const cases: ByoCaseContext<Tx> = {
      name, queuePrefix: "ri.test.byo-mysql", cleanups, balance, outboxRows,
      store: () => store,
      credit: (tx, account, delta) => layer.credit(tx, account, delta),
    };

    byoSharedCases(cases);

    /**
     * Makes InnoDB end `tx` with a deadlock, which the caller may swallow: `tx` holds the row of
     * `held`, a heavier transaction (more rows changed, so never the victim) holds `other` and
     * waits for `held`, then `tx` asks for `other`.
     */
    async function deadlockIn(tx: Tx, held: string, other: string): Promise<unknown> {
      await withAdmin(db.url, (c) => c.query("CREATE TABLE IF NOT EXISTS byo_ballast (n INT PRIMARY KEY) ENGINE=InnoDB"));
      const rival = await mysql.createConnection(db.url);
      try {
        await rival.query("START TRANSACTION");
        await rival.query(`INSERT INTO byo_ballast (n) VALUES ${Array.from({ length: 50 }, (_, i) => `(${i})`).join(", ")}`);
        await rival.query("UPDATE byo_accounts SET balance_cents = balance_cents WHERE id = ?", [other]);
        const waiting = rival.query("UPDATE byo_accounts SET balance_cents = balance_cents WHERE id = ?", [held]);
        waiting.catch(() => undefined);
        await sleep(300); // the rival is now waiting for `held`
        const failure = await layer.executor.query("UPDATE byo_accounts SET balance_cents = balance_cents + 1 WHERE id = ?", [other], tx).then(() => null, (e: unknown) => e);
        await waiting;
        await rival.query("ROLLBACK");
        return failure;
      } finally {
        await rival.end();
      }
    }

    it("the executor passes `?` placeholders through and reports the server's affected rows: 1 for an insert, 2 for a duplicate it updated", async () => {
      const upsert = "INSERT INTO byo_accounts (id, balance_cents) VALUES (?, ?) ON DUPLICATE KEY UPDATE balance_cents = balance_cents + ?";
      const inserted = await layer.executor.query(upsert, ["q", 1, 1]);
      const updated = await layer.executor.query(upsert, ["q", 1, 1]);
      expect([inserted.rowCount, updated.rowCount]).toEqual([1, 2]);
      // A value holding a `?` stays a value: nothing re-reads the statement's text for placeholders.
      const { rows } = await layer.executor.query("SELECT CAST(balance_cents AS CHAR) AS b, ? AS literal FROM byo_accounts WHERE id = ?", ["a?b", "q"]);
      expect(rows).toEqual([{ b: "2", literal: "a?b" }]);
      expect(await balance("q")).toBe(2);
      expect(store.dialect).toBe("mysql");
    });

    it("a handler that swallows a deadlock gets nothing committed: the server ended the transaction, the store refuses its COMMIT", async () => {
      await withAdmin(db.url, (c) => c.query("INSERT INTO byo_accounts (id, balance_cents) VALUES ('z', 0)"));
      let swallowed: unknown;
      const error = await store.transaction(async (tx) => {
        await tx.claim(`byo-${name}`, [{ key: { tenant: "t1", eventId: "e-1" }, fingerprint: "f" }]);
        await layer.credit(tx.handle, "a", 100);
        swallowed = await deadlockIn(tx.handle, "a", "z");
      }).then(() => null, (e: unknown) => e);
      expect(layer.executor.driverError?.(swallowed) ?? swallowed).toMatchObject({ errno: 1213 });
      expect(error).toBeInstanceOf(TransientStoreError);
      expect((error as Error).message).toContain("ended before the data layer's COMMIT");
      // Neither the inbox record nor the write before the deadlock: the server rolled both back.
      expect(await balance("a")).toBeNull();
      expect(await balance("z")).toBe(0);
      expect(await store.countInbox(`byo-${name}`)).toBe(0);

      // Through the pipeline: the refused attempt is retried, and the event applies once.
      let deadlocked = false;
      const handler = creditHandler(cases, {
        afterWrite: async (_event, tx) => {
          if (deadlocked) return;
          deadlocked = true;
          await deadlockIn(tx, "a", "z");
        },
      });
      const [outcome] = await pipelineOn(handler, store).process([incomingMessage(creditEvent("e-2", "a", 100))]);
      expect(outcome!.kind).toBe("applied");
      expect(handler.calls).toBe(2);
      expect(await balance("a")).toBe(100);
      expect(await store.countInbox(handler.name)).toBe(1);
    });

    it("a session lost at the data layer's COMMIT is CommitOutcomeUnknownError: not acked, and the redelivery applies once", async () => {
      // The data layer's real COMMIT runs on a session killed just before it is sent.
      const executor = layer.executor;
      const killer: SqlExecutor<Tx> = {
        ...executor,
        transaction: (work) => executor.transaction(async (tx) => {
          const result = await work(tx);
          const { rows } = await executor.query("SELECT CONNECTION_ID() AS id", [], tx);
          const id = Number(rows[0]!.id);
          await withAdmin(db.url, async (c) => {
            await c.query(`KILL CONNECTION ${id}`);
            for (let i = 0; i < 100 && ((await c.query("SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ?", [id]))[0] as Rows).length > 0; i++) {
              await sleep(20);
            }
          });
          await sleep(50); // let the client see its socket close
          return result;
        }),
      };
      const handler = creditHandler(cases);
      const [lost] = await pipelineOn(handler, new MysqlExecutorStore({ executor: killer })).process([incomingMessage(creditEvent("e-1", "a", 100))]);
      expect(lost!.kind).toBe("requeue");
      expect(lost!.kind === "requeue" && lost!.error).toBeInstanceOf(CommitOutcomeUnknownError);
      // The broker redelivers; the dedup record decides. Here the COMMIT never reached the server.
      const [again] = await pipelineOn(handler, store).process([incomingMessage(creditEvent("e-1", "a", 100), { redelivered: true })]);
      expect(again!.kind).toBe("applied");
      const [third] = await pipelineOn(handler, store).process([incomingMessage(creditEvent("e-1", "a", 100), { redelivered: true })]);
      expect(third!.kind).toBe("duplicate");
      expect(await balance("a")).toBe(100);
    });

    it("shares migrations with MysqlStore: either runs first, the other has nothing left to do", async () => {
      const versions = () => withAdmin(db.url, async (c) => ((await c.query("SELECT version FROM rabbit_inbox_migrations ORDER BY version"))[0] as Rows).map((r) => Number(r.version)));
      const before = await versions();
      expect(before.length).toBeGreaterThanOrEqual(5);
      const mysqlStore = await MysqlStore.connect(db.url);
      try {
        await mysqlStore.migrate();
        // A record written through the data layer is seen by MysqlStore.
        await pipelineOn(creditHandler(cases), store).process([incomingMessage(creditEvent("e-1", "a", 1))]);
        expect(await mysqlStore.countInbox(`byo-${name}`)).toBe(1);
      } finally {
        await mysqlStore.close();
      }
      await store.migrate();
      expect(await versions()).toEqual(before);
    });
  });
}
