/**
 * Bring your own transaction with Prisma 7 interactive transactions, on the client generated from
 * examples/byo-transaction/prisma/schema.prisma (`npm run prisma:generate`) with @prisma/adapter-pg.
 */
import { PrismaPg } from "@prisma/adapter-pg";
import { describe, expect, it } from "vitest";
import { type PrismaTransactionClient, fromPrisma, prismaStore } from "../../src/adapters/prisma.js";
import { PermanentEventError, TransientStoreError } from "../../src/index.js";
import { PrismaClient } from "../../examples/byo-transaction/prisma/generated/client.js";
import { describeByoTransaction } from "../support/byo-transaction.js";
import { createPgSchema } from "../support/databases.js";

type Tx = PrismaTransactionClient<PrismaClient>;

/** Prisma qualifies model tables with a schema name; raw SQL (the inbox's) follows the search_path. */
function openPrisma(url: string, schema: string): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 5 }, { schema }) });
}

async function credit(tx: Tx, account: string, delta: number): Promise<void> {
  await tx.account.upsert({
    where: { id: account },
    create: { id: account, balanceCents: BigInt(delta) },
    update: { balanceCents: { increment: BigInt(delta) } },
  });
}

// Interactive transactions expire after 5 s by default; the concurrency tests wait on row locks.
const transactionOptions = { timeout: 30_000, maxWait: 10_000 };

describeByoTransaction<Tx>("prisma", (url, schema) => {
  const prisma = openPrisma(url, schema);
  return Promise.resolve({
    store: prismaStore(prisma, { transactionOptions }),
    executor: fromPrisma(prisma, { transactionOptions }),
    credit,
    close: () => prisma.$disconnect(),
  });
});

describe("prisma adapter", () => {
  it("reads the SQLSTATE under Prisma's P2002/P2010: a business constraint violation is permanent", async () => {
    const pgSchema = await createPgSchema();
    const prisma = openPrisma(pgSchema.url, pgSchema.schema);
    try {
      const store = prismaStore(prisma);
      await store.migrate();
      await prisma.$executeRawUnsafe("CREATE TABLE byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)");
      await prisma.account.create({ data: { id: "a", balanceCents: 1n } });
      const modelError = await store.transaction(async (tx) => { await tx.handle.account.create({ data: { id: "a", balanceCents: 1n } }); }).then(() => null, (e: unknown) => e);
      expect(modelError).toBeInstanceOf(PermanentEventError);
      expect((modelError as PermanentEventError).reason).toBe("constraint_violation");
      const rawError = await store.transaction(async (tx) => { await tx.handle.$queryRawUnsafe("SELECT 1 / 0"); }).then(() => null, (e: unknown) => e);
      expect(rawError).toBeInstanceOf(PermanentEventError);
      expect((rawError as PermanentEventError).reason).toBe("invalid");
    } finally {
      await prisma.$disconnect();
      await pgSchema.drop();
    }
  });

  it("an interactive transaction that outlives Prisma's timeout is rolled back and retried, never reported applied", async () => {
    const pgSchema = await createPgSchema();
    const prisma = openPrisma(pgSchema.url, pgSchema.schema);
    try {
      const store = prismaStore(prisma, { transactionOptions: { timeout: 200 } });
      await prisma.$executeRawUnsafe("CREATE TABLE byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)");
      await prismaStore(prisma).migrate();
      const error = await store.transaction(async (tx) => {
        await tx.claim("slow", [{ key: { tenant: "t1", eventId: "e-1" }, fingerprint: "f" }]);
        await credit(tx.handle, "a", 5);
      }, () => new Promise((resolve) => setTimeout(resolve, 400))).then(() => null, (e: unknown) => e);
      expect(error).not.toBeNull();
      expect(error instanceof TransientStoreError || (error as { code?: string }).code === "P2028").toBe(true);
      expect(await store.countInbox("slow")).toBe(0);
      expect(await prisma.account.count()).toBe(0);
    } finally {
      await prisma.$disconnect();
      await pgSchema.drop();
    }
  });
});
