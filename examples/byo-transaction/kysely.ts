/**
 * Bring your own transaction with Kysely 0.28: the handler writes through Kysely's Transaction,
 * and the inbox record commits or rolls back with it.
 *
 *   npx tsx examples/byo-transaction/kysely.ts
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), AMQP_URL, QUEUE.
 */
import { Kysely, PostgresDialect, type Transaction, sql } from "kysely";
import pg from "pg";
import { kyselyStore } from "../../src/adapters/kysely.js"; // in your project: "rabbit-inbox/kysely"
import { databaseUrl, runExample } from "./run-example.js";

interface Database {
  byo_accounts: { id: string; balance_cents: string | number };
}

const pool = new pg.Pool({ connectionString: databaseUrl });
// A session lost while a client is checked out emits 'error' on it; without a listener that crashes the process.
pool.on("connect", (client) => client.on("error", () => undefined));
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });

const store = kyselyStore(db);
await store.migrate();
await sql`CREATE TABLE IF NOT EXISTS byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)`.execute(db);

const ok = await runExample<Transaction<Database>>({
  name: "kysely",
  store,
  credit: async (tx, account, delta) => {
    await tx.insertInto("byo_accounts").values({ id: account, balance_cents: delta })
      .onConflict((oc) => oc.column("id").doUpdateSet({ balance_cents: (eb) => eb("byo_accounts.balance_cents", "+", delta) }))
      .execute();
  },
  balance: async (account) => {
    const row = await db.selectFrom("byo_accounts").select("balance_cents").where("id", "=", account).executeTakeFirst();
    return row ? Number(row.balance_cents) : null;
  },
});
await db.destroy();
process.exitCode = ok ? 0 : 1;
