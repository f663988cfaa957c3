/** Bring your own transaction with MikroORM 6 (`@mikro-orm/postgresql`). */
import type { FlushEventArgs } from "@mikro-orm/core";
import type { SqlEntityManager } from "@mikro-orm/knex";
import { MikroORM } from "@mikro-orm/postgresql";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fromMikroOrm, mikroOrmStore } from "../../src/adapters/mikro-orm.js";
import { creditEvent, creditHandler, pipelineOn } from "../support/byo-cases.js";
import { describeByoTransaction } from "../support/byo-transaction.js";
import { type TestPgSchema, createPgSchema } from "../support/databases.js";
import { incomingMessage } from "../support/messages.js";
import { mikroAccounts, mikroCredit } from "../support/orm-accounts.js";

async function openMikroOrm(url: string, schema: string): Promise<MikroORM> {
  // MikroORM reads host, user and database from clientUrl but not libpq's `options`: the
  // schema's search_path goes to the driver as a connection option of its own.
  return MikroORM.init({
    clientUrl: url, entities: [mikroAccounts], pool: { min: 0, max: 5 },
    driverOptions: { connection: { options: `-c search_path=${schema}` } },
    discovery: { warnWhenNoEntities: false }, debug: false,
  });
}

describeByoTransaction<SqlEntityManager>("mikro-orm", async (url, schema) => {
  const orm = await openMikroOrm(url, schema);
  return { store: mikroOrmStore(orm.em), executor: fromMikroOrm(orm.em), credit: mikroCredit, close: () => orm.close(true) };
});

describe("mikro-orm adapter: the unit of work", () => {
  let schema: TestPgSchema;
  let orm: MikroORM;
  beforeEach(async () => {
    schema = await createPgSchema();
    orm = await openMikroOrm(schema.url, schema.schema);
    await mikroOrmStore(orm.em).migrate();
    await orm.em.getKnex().raw("CREATE TABLE byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)");
  });
  afterEach(async () => {
    await orm.close(true);
    await schema.drop();
  });

  it("is flushed inside the transaction before the store's before-commit point, so that point sees the handler's entities written", async () => {
    const store = mikroOrmStore(orm.em);
    const executor = fromMikroOrm(orm.em);
    let handle: SqlEntityManager | undefined;
    let seen: unknown[] | undefined;
    await store.transaction(async (tx) => {
      handle = tx.handle;
      await tx.claim("uow", [{ key: { tenant: "t1", eventId: "e-1" }, fingerprint: "f" }]);
      await mikroCredit(tx.handle, "a", 5);
    }, async () => {
      seen = (await executor.query("SELECT balance_cents::text AS b FROM byo_accounts WHERE id = $1", ["a"], handle)).rows;
    });
    expect(seen).toEqual([{ b: "5" }]);
  });

  it("a session lost while the unit of work is flushed is a lost session, not an unknown COMMIT: retried at once, applied once", async () => {
    const store = mikroOrmStore(orm.em);
    let killed = 0;
    // The session goes in the middle of the flush, after every check the store makes before it.
    orm.em.getEventManager().registerSubscriber({
      async onFlush(args: FlushEventArgs) {
        if (killed++ > 0 || args.uow.getChangeSets().length === 0) return;
        const { rows } = await fromMikroOrm(orm.em).query("SELECT pg_backend_pid() AS pid", [], args.em as SqlEntityManager);
        await terminateBackend(schema.url, Number(rows[0]!.pid));
      },
    });
    const handler = creditHandler<SqlEntityManager>({ name: "mikro-orm", credit: (tx, account, delta) => mikroCredit(tx, account, delta) });
    const [outcome] = await pipelineOn(handler, store).process([incomingMessage(creditEvent("e-1", "a", 100))]);
    expect(outcome!.kind).toBe("applied");
    expect(handler.calls).toBe(2);
    const { rows } = await fromMikroOrm(orm.em).query("SELECT balance_cents::text AS b FROM byo_accounts WHERE id = $1", ["a"]);
    expect(rows).toEqual([{ b: "100" }]);
    expect(await store.countInbox(handler.name)).toBe(1);
  });
});

async function terminateBackend(url: string, pid: number): Promise<void> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query("SELECT pg_terminate_backend($1)", [pid]);
    for (let i = 0; i < 100 && (await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).rows.length > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await admin.end();
  }
  await new Promise((resolve) => setTimeout(resolve, 50)); // let the client see its socket close
}
