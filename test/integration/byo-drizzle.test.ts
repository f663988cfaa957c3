/** Bring your own transaction with Drizzle (drizzle-orm with node-postgres). */
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/node-postgres";
import { bigint, pgTable, text } from "drizzle-orm/pg-core";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { type DrizzleTransaction, drizzleStore, fromDrizzle } from "../../src/adapters/drizzle.js";
import { PermanentEventError } from "../../src/index.js";
import { describeByoTransaction } from "../support/byo-transaction.js";
import { createPgSchema } from "../support/databases.js";

const accounts = pgTable("byo_accounts", {
  id: text("id").primaryKey(),
  balanceCents: bigint("balance_cents", { mode: "number" }).notNull(),
});
const schema = { accounts };
type Tx = DrizzleTransaction<typeof schema>;

function openDrizzle(url: string) {
  const pool = new pg.Pool({ connectionString: url, max: 5 });
  // A session terminated while a client is checked out emits 'error' on that client; pg-pool
  // listens only while it is idle, so without this the process would crash (Drizzle adds none).
  pool.on("connect", (client) => client.on("error", () => undefined));
  return { db: drizzle(pool, { schema }), pool };
}

async function credit(tx: Tx, account: string, delta: number): Promise<void> {
  await tx.insert(accounts).values({ id: account, balanceCents: delta })
    .onConflictDoUpdate({ target: accounts.id, set: { balanceCents: sql`${accounts.balanceCents} + ${delta}` } });
}

describeByoTransaction<Tx>("drizzle", (url) => {
  const { db, pool } = openDrizzle(url);
  return Promise.resolve({ store: drizzleStore(db), executor: fromDrizzle(db), credit, close: () => pool.end() });
});

describe("drizzle adapter", () => {
  it("sees the node-postgres error under DrizzleQueryError: a business constraint violation is permanent", async () => {
    const pgSchema = await createPgSchema();
    const { db, pool } = openDrizzle(pgSchema.url);
    try {
      const store = drizzleStore(db);
      await store.migrate();
      await db.execute(sql`CREATE TABLE byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL CHECK (balance_cents >= 0))`);
      const error = await store.transaction((tx) => credit(tx.handle, "a", -1)).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(PermanentEventError);
      expect((error as PermanentEventError).reason).toBe("constraint_violation");
      expect(((error as Error).cause as { code?: string }).code).toBe("23514");
    } finally {
      await pool.end();
      await pgSchema.drop();
    }
  });
});
