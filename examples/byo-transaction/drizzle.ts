/**
 * Bring your own transaction with Drizzle (drizzle-orm with node-postgres): the handler writes
 * through Drizzle's transaction, and the inbox record commits or rolls back with it.
 *
 *   npx tsx examples/byo-transaction/drizzle.ts
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), AMQP_URL, QUEUE.
 */
import { eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/node-postgres";
import { bigint, pgTable, text } from "drizzle-orm/pg-core";
import pg from "pg";
import { type DrizzleTransaction, drizzleStore } from "../../src/adapters/drizzle.js"; // in your project: "rabbit-inbox/drizzle"
import { databaseUrl, runExample } from "./run-example.js";

const accounts = pgTable("byo_accounts", {
  id: text("id").primaryKey(),
  balanceCents: bigint("balance_cents", { mode: "number" }).notNull(),
});
const schema = { accounts };

const pool = new pg.Pool({ connectionString: databaseUrl });
// A session lost while a client is checked out emits 'error' on it; without a listener that crashes the process.
pool.on("connect", (client) => client.on("error", () => undefined));
const db = drizzle(pool, { schema });

const store = drizzleStore(db);
await store.migrate();
await db.execute(sql`CREATE TABLE IF NOT EXISTS byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)`);

const ok = await runExample<DrizzleTransaction<typeof schema>>({
  name: "drizzle",
  store,
  credit: async (tx, account, delta) => {
    await tx.insert(accounts).values({ id: account, balanceCents: delta })
      .onConflictDoUpdate({ target: accounts.id, set: { balanceCents: sql`${accounts.balanceCents} + ${delta}` } });
  },
  balance: async (account) => {
    const [row] = await db.select().from(accounts).where(eq(accounts.id, account));
    return row ? row.balanceCents : null;
  },
});
await pool.end();
process.exitCode = ok ? 0 : 1;
