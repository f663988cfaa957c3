/** Bring your own transaction with Drizzle on MySQL / MariaDB (drizzle-orm with mysql2). */
import { sql } from "drizzle-orm";
import { bigint, mysqlTable, varchar } from "drizzle-orm/mysql-core";
import { drizzle } from "drizzle-orm/mysql2";
import mysql from "mysql2/promise";
import { describe, expect, it } from "vitest";
import { type MySqlDrizzleTransaction, drizzleStore, fromDrizzleMysql } from "../../src/adapters/drizzle.js";
import { PermanentEventError } from "../../src/index.js";
import { describeByoTransactionMysql } from "../support/byo-transaction-mysql.js";
import { createMysqlDatabase } from "../support/databases.js";

const accounts = mysqlTable("byo_accounts", {
  id: varchar("id", { length: 64 }).primaryKey(),
  balanceCents: bigint("balance_cents", { mode: "number" }).notNull(),
});
const schema = { accounts };
type Tx = MySqlDrizzleTransaction<typeof schema>;

function openDrizzle(url: string) {
  const pool = mysql.createPool({ uri: url, connectionLimit: 5 });
  // mysql2 removes a pooled connection on its first 'error' with a once-listener; a second
  // 'error' on the same dead connection (a killed session) would crash the process.
  pool.pool.on("connection", (connection) => connection.on("error", () => undefined));
  return { db: drizzle(pool, { schema, mode: "default" }), pool };
}

async function credit(tx: Tx, account: string, delta: number): Promise<void> {
  await tx.insert(accounts).values({ id: account, balanceCents: delta })
    .onDuplicateKeyUpdate({ set: { balanceCents: sql`${accounts.balanceCents} + ${delta}` } });
}

describeByoTransactionMysql<Tx>("drizzle", (url) => {
  const { db, pool } = openDrizzle(url);
  return Promise.resolve({ store: drizzleStore(db), executor: fromDrizzleMysql(db), credit, close: () => pool.end() });
});

describe("drizzle adapter on MySQL", () => {
  it("sees the mysql2 error under DrizzleQueryError: a business constraint violation is permanent", async () => {
    const database = await createMysqlDatabase();
    const { db, pool } = openDrizzle(database.url);
    try {
      const store = drizzleStore(db);
      expect(store.dialect).toBe("mysql");
      await store.migrate();
      await db.execute(sql`CREATE TABLE byo_accounts (id VARCHAR(64) PRIMARY KEY, balance_cents BIGINT NOT NULL CHECK (balance_cents >= 0))`);
      const error = await store.transaction((tx) => credit(tx.handle, "a", -1)).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(PermanentEventError);
      expect((error as PermanentEventError).reason).toBe("constraint_violation");
      // MariaDB's CHECK failure (4025), MySQL's would be 3819.
      expect([4025, 3819]).toContain(((error as Error).cause as { errno?: number }).errno);
    } finally {
      await pool.end();
      await database.drop();
    }
  });
});
