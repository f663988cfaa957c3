/**
 * Bring your own transaction with Prisma 7 interactive transactions on MySQL / MariaDB, on the
 * client generated from examples/byo-transaction/prisma/schema.mysql.prisma
 * (`npm run prisma:generate`) with @prisma/adapter-mariadb.
 */
import { PrismaMariaDb } from "@prisma/adapter-mariadb";
import { describe, expect, it } from "vitest";
import { type PrismaTransactionClient, fromPrismaMysql, prismaStore } from "../../src/adapters/prisma.js";
import { PermanentEventError, TransientStoreError } from "../../src/index.js";
import { PrismaClient } from "../../examples/byo-transaction/prisma/generated-mysql/client.js";
import { describeByoTransactionMysql } from "../support/byo-transaction-mysql.js";
import { createMysqlDatabase } from "../support/databases.js";

type Tx = PrismaTransactionClient<PrismaClient>;

function openPrisma(url: string): PrismaClient {
  const withPool = new URL(url);
  withPool.searchParams.set("connectionLimit", "5");
  return new PrismaClient({ adapter: new PrismaMariaDb(withPool.toString()) });
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

describeByoTransactionMysql<Tx>("prisma", (url) => {
  const prisma = openPrisma(url);
  return Promise.resolve({
    store: prismaStore(prisma, { transactionOptions }),
    executor: fromPrismaMysql(prisma, { transactionOptions }),
    credit,
    close: () => prisma.$disconnect(),
  });
});

describe("prisma adapter on MySQL", () => {
  it("reads the MySQL error under Prisma's P2002/P2010: a business constraint violation is permanent, bad data invalid", async () => {
    const database = await createMysqlDatabase();
    const prisma = openPrisma(database.url);
    try {
      const store = prismaStore(prisma);
      expect(store.dialect).toBe("mysql");
      await store.migrate();
      await prisma.$executeRawUnsafe("CREATE TABLE byo_accounts (id VARCHAR(64) PRIMARY KEY, balance_cents BIGINT NOT NULL)");
      await prisma.account.create({ data: { id: "a", balanceCents: 1n } });
      const modelError = await store.transaction(async (tx) => { await tx.handle.account.create({ data: { id: "a", balanceCents: 1n } }); }).then(() => null, (e: unknown) => e);
      expect(modelError).toBeInstanceOf(PermanentEventError);
      expect((modelError as PermanentEventError).reason).toBe("constraint_violation");
      const rawError = await store.transaction(async (tx) => {
        await tx.handle.$executeRawUnsafe("INSERT INTO byo_accounts (id, balance_cents) VALUES ('b', 99999999999999999999)");
      }).then(() => null, (e: unknown) => e);
      expect(rawError).toBeInstanceOf(PermanentEventError);
      expect((rawError as PermanentEventError).reason).toBe("invalid");
      expect(await prisma.account.count()).toBe(1);
    } finally {
      await prisma.$disconnect();
      await database.drop();
    }
  });

  it("an interactive transaction that outlives Prisma's timeout is rolled back and retried, never reported applied", async () => {
    const database = await createMysqlDatabase();
    const prisma = openPrisma(database.url);
    try {
      const store = prismaStore(prisma, { transactionOptions: { timeout: 200 } });
      await prisma.$executeRawUnsafe("CREATE TABLE byo_accounts (id VARCHAR(64) PRIMARY KEY, balance_cents BIGINT NOT NULL)");
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
      await database.drop();
    }
  });
});
