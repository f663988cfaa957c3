/**
 * Bring your own transaction with Knex: the handler writes through the `Knex.Transaction`, and
 * the inbox record commits or rolls back with it.
 *
 *   npx tsx examples/byo-transaction/knex.ts
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), AMQP_URL, QUEUE.
 */
import knexFactory, { type Knex } from "knex";
import { knexStore } from "../../src/adapters/knex.js"; // in your project: "rabbit-inbox/knex"
import { databaseUrl, runExample } from "./run-example.js";

const knex = knexFactory({ client: "pg", connection: databaseUrl });

const store = knexStore(knex);
await store.migrate();
await knex.raw("CREATE TABLE IF NOT EXISTS byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)");

const ok = await runExample<Knex.Transaction>({
  name: "knex",
  store,
  credit: async (trx, account, delta) => {
    await trx("byo_accounts").insert({ id: account, balance_cents: delta })
      .onConflict("id").merge({ balance_cents: trx.raw("byo_accounts.balance_cents + ?", [delta]) });
  },
  balance: async (account) => {
    const row = await knex<{ id: string; balance_cents: string }>("byo_accounts").where({ id: account }).first("balance_cents");
    return row ? Number(row.balance_cents) : null;
  },
});
await knex.destroy();
process.exitCode = ok ? 0 : 1;
