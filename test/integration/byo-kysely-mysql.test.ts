/** Bring your own transaction with Kysely 0.28 on MySQL / MariaDB (MysqlDialect on a mysql2 pool). */
import { CamelCasePlugin, Kysely, MysqlDialect, PostgresDialect, type Transaction, sql } from "kysely";
import { createPool } from "mysql2";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { fromKyselyMysql, kyselyStore } from "../../src/adapters/kysely.js";
import { InboxConfigError } from "../../src/index.js";
import { describeByoTransactionMysql } from "../support/byo-transaction-mysql.js";
import { createMysqlDatabase, pgUrl } from "../support/databases.js";

interface Database {
  byo_accounts: { id: string; balance_cents: string | number | bigint };
}

function openKysely(url: string, plugins: ConstructorParameters<typeof CamelCasePlugin>[] = []): Kysely<Database> {
  const pool = createPool({ uri: url, connectionLimit: 5 });
  // mysql2 removes a pooled connection on its first 'error' with a once-listener; a second
  // 'error' on the same dead connection (a killed session) would crash the process.
  pool.on("connection", (connection) => connection.on("error", () => undefined));
  return new Kysely<Database>({ dialect: new MysqlDialect({ pool }), plugins: plugins.map((options) => new CamelCasePlugin(...options)) });
}

async function credit(tx: Transaction<Database>, account: string, delta: number): Promise<void> {
  await tx.insertInto("byo_accounts").values({ id: account, balance_cents: delta })
    .onDuplicateKeyUpdate({ balance_cents: sql`balance_cents + ${delta}` })
    .execute();
}

describeByoTransactionMysql<Transaction<Database>>("kysely", (url) => {
  const db = openKysely(url);
  return Promise.resolve({ store: kyselyStore(db), executor: fromKyselyMysql(db), credit, close: () => db.destroy() });
});

describe("kysely adapter on MySQL", () => {
  it("tells MysqlDialect from PostgresDialect by its query compiler, and takes `database`, not `schema`, on MySQL", async () => {
    const database = await createMysqlDatabase();
    const db = openKysely(database.url);
    const onPg = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: pgUrl, max: 1 }) }) });
    try {
      expect(kyselyStore(db).dialect).toBe("mysql");
      expect(kyselyStore(db, { database: "elsewhere" }).dialect).toBe("mysql");
      expect(kyselyStore(onPg).dialect).toBe("postgres");
      // The explicit option wins over what the compiler says.
      expect(kyselyStore(onPg, { dialect: "mysql" }).dialect).toBe("mysql");
      expect(() => kyselyStore(db, { schema: "s" })).toThrow(InboxConfigError);
      expect(() => kyselyStore(onPg, { database: "d" })).toThrow(InboxConfigError);
      expect(() => kyselyStore(db, { dialect: "oracle" as "mysql" })).toThrow(InboxConfigError);
    } finally {
      await db.destroy();
      await onPg.destroy();
      await database.drop();
    }
  });

  it("reads the inbox's own rows unchanged under a CamelCasePlugin, while the handler's Transaction keeps the plugin", async () => {
    const database = await createMysqlDatabase();
    const db = openKysely(database.url, [[]]);
    try {
      const store = kyselyStore(db);
      await store.migrate();
      await sql`CREATE TABLE byo_accounts (id VARCHAR(64) PRIMARY KEY, balance_cents BIGINT NOT NULL)`.execute(db);
      const seen: string[] = [];
      const claimed = await store.transaction(async (tx) => {
        const row = await sql<Record<string, unknown>>`SELECT 1 AS some_column`.execute(tx.handle);
        seen.push(...Object.keys(row.rows[0]!));
        await credit(tx.handle, "a", 5);
        return tx.claim("camel", [{ key: { tenant: "t1", eventId: "e-1" }, fingerprint: "f1" }]);
      });
      const again = await store.transaction((tx) => tx.claim("camel", [{ key: { tenant: "t1", eventId: "e-1" }, fingerprint: "f2" }]));
      expect(claimed).toEqual([{ status: "claimed" }]);
      expect(again).toEqual([{ status: "exists", fingerprint: "f1" }]);
      expect(seen).toEqual(["someColumn"]);
    } finally {
      await db.destroy();
      await database.drop();
    }
  });
});
