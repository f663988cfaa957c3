/**
 * rabbit-inbox/nestjs in a real Nest application: the decorated methods found at bootstrap, one
 * consumer each on the real broker, the store's transaction (TypeORM on PostgreSQL, MikroORM on
 * MariaDB) as `ctx.tx`, the outbox relay started with the app, the drain on close, the terminus
 * health indicator, and the configuration errors that stop the bootstrap.
 */
import "reflect-metadata";
import { randomBytes } from "node:crypto";
import { Controller, Get, Inject, Injectable, Module, type INestApplication, type INestApplicationContext } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { HealthCheck, HealthCheckService, TerminusModule } from "@nestjs/terminus";
import type { SqlEntityManager } from "@mikro-orm/knex";
import { MikroORM } from "@mikro-orm/mysql";
import amqp from "amqplib";
import { DataSource, type EntityManager } from "typeorm";
import { afterEach, describe, expect, it } from "vitest";
import { mikroOrmStore } from "../../src/adapters/mikro-orm.js";
import { typeormStore } from "../../src/adapters/typeorm.js";
import { type HandlerContext, InboxConfigError, InvalidEventError, type Store, readId } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { InboxHandler, RabbitInboxHealthIndicator, RabbitInboxModule, type RabbitInboxModuleOptions, RabbitInboxService } from "../../src/nestjs/index.js";
import { MysqlStore } from "../../src/store/mysql/index.js";
import { PostgresStore } from "../../src/store/postgres/index.js";
import { amqpUrl, deleteConsumerQueues, deleteExchanges, publishAll, waitFor, withChannel } from "../support/broker.js";
import { createMysqlDatabase, createPgSchema } from "../support/databases.js";
import { mikroAccounts, mikroCredit, typeormAccounts, typeormCredit } from "../support/orm-accounts.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { onSelectedDatabases } from "../support/test-databases.js";

interface Credit {
  account: string;
  delta: number;
}

function parseCredit(body: Record<string, unknown>) {
  const { account, delta } = body;
  if (typeof account !== "string" || typeof delta !== "number" || !Number.isSafeInteger(delta)) throw new InvalidEventError("account and delta (integer) required");
  return { key: { tenant: readId(body, "tenant"), eventId: readId(body, "event_id") }, event: { account, delta } };
}

const credit = (eventId: string, account: string, delta: number) => ({ tenant: "t1", event_id: eventId, account, delta });
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** A database for the handler: its store, the relay's store on the same tables, a credit through the ORM, a balance read. */
interface NestDatabase {
  store: Store<unknown>;
  relayStore: PostgresStore | MysqlStore;
  credit(tx: unknown, account: string, delta: number): Promise<void>;
  balance(account: string): Promise<number | null>;
}

async function typeormOnPostgres(): Promise<NestDatabase> {
  const schema = await createPgSchema();
  const dataSource = await new DataSource({ type: "postgres", url: schema.url, schema: schema.schema, entities: [typeormAccounts], poolSize: 5 }).initialize();
  const relayStore = await PostgresStore.connect(schema.url);
  cleanups.push(() => schema.drop(), () => dataSource.destroy(), () => relayStore.close());
  const store = typeormStore(dataSource);
  await store.migrate();
  await dataSource.query("CREATE TABLE byo_accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)");
  return {
    store, relayStore,
    credit: (tx, account, delta) => typeormCredit(tx as EntityManager, account, delta),
    async balance(account) {
      const rows = await dataSource.query<Array<{ b: string }>>("SELECT balance_cents::text AS b FROM byo_accounts WHERE id = $1", [account]);
      return rows.length === 0 ? null : Number(rows[0]!.b);
    },
  };
}

async function mikroOrmOnMariadb(): Promise<NestDatabase> {
  const db = await createMysqlDatabase();
  const orm = await MikroORM.init({ clientUrl: db.url, entities: [mikroAccounts], pool: { min: 0, max: 5 }, discovery: { warnWhenNoEntities: false } });
  const relayStore = await MysqlStore.connect(db.url);
  cleanups.push(() => db.drop(), () => orm.close(true), () => relayStore.close());
  const store = mikroOrmStore(orm.em);
  await store.migrate();
  await orm.em.getKnex().raw("CREATE TABLE byo_accounts (id VARCHAR(64) COLLATE utf8mb4_bin PRIMARY KEY, balance_cents BIGINT NOT NULL) ENGINE=InnoDB");
  return {
    store, relayStore,
    credit: (tx, account, delta) => mikroCredit(tx as SqlEntityManager, account, delta),
    async balance(account) {
      const rows = (await orm.em.getKnex().raw("SELECT CAST(balance_cents AS CHAR) AS b FROM byo_accounts WHERE id = ?", [account]))[0] as Array<{ b: string }>;
      return rows.length === 0 ? null : Number(rows[0]!.b);
    },
  };
}

const DATABASE = Symbol("database");
const QUEUE = Symbol("queue");

/** The application's own provider: a decorated method credits the account and publishes what changed. */
@Injectable()
class Credits {
  calls = 0;
  constructor(@Inject(DATABASE) private readonly database: NestDatabase, @Inject(QUEUE) private readonly queue: string) {}

  @InboxHandler<Credit>({ handler: "credits", parse: parseCredit, batchSize: 10 })
  async apply(event: Credit, ctx: HandlerContext<unknown>): Promise<void> {
    this.calls++;
    await this.database.credit(ctx.tx, event.account, event.delta);
    await ctx.publish(`${this.queue}.credited`, "", { account: event.account, delta: event.delta, key: ctx.idempotencyKey() });
  }
}

@Controller()
class ReadinessController {
  constructor(@Inject(HealthCheckService) private readonly health: HealthCheckService, @Inject(RabbitInboxHealthIndicator) private readonly inbox: RabbitInboxHealthIndicator) {}

  @Get("ready")
  @HealthCheck()
  ready() {
    return this.health.check([() => this.inbox.isHealthy()]);
  }
}

function appModule(database: NestDatabase, queue: string, options: Partial<RabbitInboxModuleOptions> = {}) {
  @Module({
    imports: [
      RabbitInboxModule.forRoot({
        url: amqpUrl, store: database.store, logger: silentLogger,
        relay: { store: database.relayStore, topology: async (channel) => { await channel.assertExchange(`${queue}.credited`, "fanout", { durable: false, autoDelete: true }); } },
        handlers: { credits: { queue } },
        ...options,
      }),
      TerminusModule.forRoot({ logger: false }),
    ],
    controllers: [ReadinessController],
    providers: [Credits, { provide: DATABASE, useValue: database }, { provide: QUEUE, useValue: queue }],
  })
  class AppModule {}
  return AppModule;
}

async function subscribe(exchange: string): Promise<{ messages: Array<Record<string, unknown>>; close: () => Promise<void> }> {
  const connection = await amqp.connect(amqpUrl);
  const channel = await connection.createChannel();
  await channel.assertExchange(exchange, "fanout", { durable: false, autoDelete: true });
  const { queue } = await channel.assertQueue("", { exclusive: true });
  await channel.bindQueue(queue, exchange, "");
  const messages: Array<Record<string, unknown>> = [];
  await channel.consume(queue, (m) => { if (m) messages.push(JSON.parse(m.content.toString()) as Record<string, unknown>); }, { noAck: true });
  return { messages, close: () => connection.close() };
}

const cases = onSelectedDatabases([
  { kind: "postgres" as const, name: "TypeORM on PostgreSQL", open: typeormOnPostgres },
  { kind: "mysql" as const, name: "MikroORM on MariaDB", open: mikroOrmOnMariadb },
], (c) => c.kind);

describe.each(cases)("RabbitInboxModule: $name", ({ open }) => {
  it("starts a consumer per @InboxHandler at bootstrap and the relay with it; applies once; stops both on close", async () => {
    const database = await open();
    const queue = `ri.test.nest.${randomBytes(4).toString("hex")}`;
    // The relay declares the auto-delete exchange; one never bound (no subscriber) is never auto-deleted.
    cleanups.push(() => deleteConsumerQueues(queue), () => deleteExchanges(`${queue}.credited`));
    const downstream = await subscribe(`${queue}.credited`);
    cleanups.push(() => downstream.close());
    const app = await NestFactory.createApplicationContext(appModule(database, queue), { logger: false });
    cleanups.push(() => app.close());
    const inbox = app.get(RabbitInboxService);
    expect([...inbox.consumers.keys()]).toEqual(["credits"]);
    expect((await inbox.health()).consumers.credits).toMatchObject({ queue, connected: true, consuming: true });

    await publishAll(queue, [credit("e-1", "a", 100), credit("e-2", "a", 50), credit("e-1", "a", 100), credit("e-2", "a", -7), "{ not json"]);
    const consumer = inbox.consumers.get("credits")!;
    await waitFor(() => Object.values(consumer.outcomeCounts).reduce((a, b) => a + b, 0) >= 5, 20_000, "five settled deliveries");
    expect(consumer.outcomeCounts).toMatchObject({ applied: 2, duplicate: 1, quarantined: 2 });
    expect(app.get(Credits).calls).toBe(2);
    expect(await database.balance("a")).toBe(150);
    expect((await database.store.listQuarantine({ handler: "credits" })).map((q) => q.reason).sort()).toEqual(["conflict", "invalid"]);
    // What the handler published went out through the relay the module started.
    await waitFor(() => downstream.messages.length >= 2, 20_000, "two credited messages");
    expect(downstream.messages.map((m) => m.delta).sort()).toEqual([100, 50].sort());

    await app.close();
    expect(consumer.health().state).toBe("stopped");
    expect((await inbox.health()).relay?.state).toBe("stopped");
  });
});

describe("RabbitInboxModule", () => {
  const pgOnly = onSelectedDatabases(["postgres" as const]);

  it.each(pgOnly)("terminus reports the inbox ready, then unready (503) once the broker is cut, and ready again after (%s)", async () => {
    const database = await typeormOnPostgres();
    const queue = `ri.test.nest.${randomBytes(4).toString("hex")}`;
    // The relay declares the auto-delete exchange; one never bound (no subscriber) is never auto-deleted.
    cleanups.push(() => deleteConsumerQueues(queue), () => deleteExchanges(`${queue}.credited`));
    const broker = new URL(amqpUrl);
    const proxy = new TcpProxy({ host: broker.hostname, port: Number(broker.port || 5672) });
    await proxy.start();
    cleanups.push(() => proxy.stop());
    broker.port = String(proxy.port);
    const app: INestApplication = await NestFactory.create(appModule(database, queue, { url: broker.toString(), consumers: { reconnectBaseDelayMs: 50, reconnectMaxDelayMs: 200 } }), { logger: false });
    cleanups.push(() => app.close());
    await app.listen(0, "127.0.0.1");
    const ready = async () => {
      const response = await fetch(`${await app.getUrl()}/ready`);
      return { status: response.status, body: (await response.json()) as { details?: Record<string, { status: string; consumers?: Record<string, { connected: boolean }> }> } };
    };
    const first = await ready();
    expect(first.status).toBe(200);
    expect(first.body.details?.["rabbit-inbox"]?.consumers?.credits?.connected).toBe(true);

    await proxy.stop();
    let cut = await ready();
    await waitFor(async () => (cut = await ready()).status === 503, 20_000, "the readiness check to answer 503");
    expect(cut.body.details?.["rabbit-inbox"]).toMatchObject({ status: "down" });

    await proxy.start();
    await waitFor(async () => (await ready()).status === 200, 30_000, "the readiness check to answer 200 again");
  });

  it.each(pgOnly)("refuses to bootstrap without a queue, with a handler name taken twice, or with a relay its store cannot run (%s)", async () => {
    const database = await typeormOnPostgres();
    const bootstrap = (options: Partial<RabbitInboxModuleOptions>, extra: Array<new (...args: never[]) => unknown> = []) => {
      @Module({
        imports: [RabbitInboxModule.forRoot({ url: amqpUrl, store: database.store, logger: silentLogger, ...options })],
        providers: [Credits, ...extra, { provide: DATABASE, useValue: database }, { provide: QUEUE, useValue: "unused" }],
      })
      class AppModule {}
      return NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    };
    await expect(bootstrap({})).rejects.toThrow(/no queue; give it in the decorator or in the module's handlers\.credits\.queue/);

    @Injectable()
    class SameName {
      @InboxHandler({ handler: "credits", queue: "elsewhere" })
      async handle(): Promise<void> {}
    }
    const twice = await bootstrap({ handlers: { credits: { queue: "q" } } }, [SameName]).then(() => null, (e: unknown) => e);
    expect(twice).toBeInstanceOf(InboxConfigError);
    expect((twice as Error).message).toMatch(/already names the handler "credits"/);

    const relay = await bootstrap({ relay: true, handlers: { credits: { queue: "q" } } }).then(() => null, (e: unknown) => e);
    expect(relay).toBeInstanceOf(InboxConfigError);
    expect((relay as Error).message).toMatch(/cannot run the outbox relay; give relay\.store/);
    // Nothing connected: no queue was declared by a consumer that should never have started.
    expect(await withChannel((ch) => ch.checkQueue("q").then(() => true, () => false))).toBe(false);
  });
});

export type { INestApplicationContext };
