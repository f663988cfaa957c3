/**
 * Bring your own transaction with Prisma 7 interactive transactions: the handler writes through
 * the transaction client, and the inbox record commits or rolls back with it.
 *
 *   npm run prisma:generate      # once: writes the client to examples/byo-transaction/prisma/generated
 *   npx tsx examples/byo-transaction/prisma.ts
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), AMQP_URL, QUEUE.
 */
import { PrismaPg } from "@prisma/adapter-pg";
import { type PrismaTransactionClient, prismaStore } from "../../src/adapters/prisma.js"; // in your project: "rabbit-inbox/prisma"
import { PrismaClient } from "./prisma/generated/client.js";
import { databaseUrl, runExample } from "./run-example.js";

// Prisma qualifies its model tables with a schema (default `public`): follow the URL's search_path if it sets one.
const searchPath = /search_path=(\w+)/.exec(new URL(databaseUrl).searchParams.get("options") ?? "")?.[1];
const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl }, searchPath ? { schema: searchPath } : undefined) });

// Prisma ends an interactive transaction after 5 s by default; give a batch of deliveries more.
const store = prismaStore(prisma, { transactionOptions: { timeout: 30_000 } });
await store.migrate();
await prisma.$executeRawUnsafe("CREATE TABLE IF NOT EXISTS byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)");

const ok = await runExample<PrismaTransactionClient<PrismaClient>>({
  name: "prisma",
  store,
  credit: async (tx, account, delta) => {
    await tx.account.upsert({
      where: { id: account },
      create: { id: account, balanceCents: BigInt(delta) },
      update: { balanceCents: { increment: BigInt(delta) } },
    });
  },
  balance: async (account) => {
    const row = await prisma.account.findUnique({ where: { id: account } });
    return row ? Number(row.balanceCents) : null;
  },
});
await prisma.$disconnect();
process.exitCode = ok ? 0 : 1;
