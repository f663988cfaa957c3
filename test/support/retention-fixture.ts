import mysql from "mysql2/promise";
import { afterEach } from "vitest";
import type { InboxHandler, Logger } from "../../src/index.js";
import { InboxPipeline, type IncomingMessage, type PipelineOptions } from "../../src/core/pipeline.js";
import type { InboxOperations } from "../../src/core/store-contract/capabilities.js";
import { type MysqlConnection, MysqlStore } from "../../src/store/mysql/index.js";
import { type PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import { type SqliteDatabase, SqliteStore } from "../../src/store/sqlite/index.js";
import { createMysqlDatabase, createPgSchema, createSqliteFile } from "./databases.js";
import { incomingMessage } from "./messages.js";
import type { TestDatabaseKind } from "./test-databases.js";

/**
 * A real database (a fresh PostgreSQL schema, MySQL/MariaDB database or SQLite file) with the
 * inbox tables, an `effects` table WITHOUT a unique key (an event applied twice shows as two
 * rows), a handler that writes one effect per applied event, and a collecting logger.
 */
export const HANDLER = "retention";

export interface LogLine { level: string; msg: string; fields: Record<string, unknown> }

export interface RetentionFixture {
  kind: TestDatabaseKind;
  /** DATABASE_URL for the `rabbit-inbox` command. */
  url: string;
  store: PostgresStore | SqliteStore | MysqlStore;
  ops: InboxOperations;
  logs: LogLine[];
  logger: Logger;
  pipeline(options?: Partial<PipelineOptions<Record<string, unknown>, unknown>>): InboxPipeline<Record<string, unknown>, unknown>;
  /** Effects per event id. */
  effects(): Promise<Map<string, number>>;
  /** Dedup rows of the test handler, by event id -> fingerprint. */
  dedup(): Promise<Map<string, string>>;
  /**
   * Rows of any table, with plain SQL. Times are Dates on PostgreSQL and MySQL (read as UTC, to
   * the millisecond), epoch ms on SQLite; MySQL's VARBINARY columns are Buffers.
   */
  rows(sql: string): Promise<Array<Record<string, unknown>>>;
  /** Moves a dedup record's first_seen back by `ms` (as if it had been applied that long ago). */
  backdate(eventId: string, ms: number): Promise<void>;
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

function collectingLogger(logs: LogLine[]): Logger {
  const log = (level: string) => (msg: string, fields: Record<string, unknown> = {}) => { logs.push({ level, msg, fields }); };
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}

export async function retentionFixture(kind: TestDatabaseKind): Promise<RetentionFixture> {
  const logs: LogLine[] = [];
  const logger = collectingLogger(logs);
  if (kind === "postgres") {
    const schema = await createPgSchema();
    const store = await PostgresStore.connect(schema.url);
    // Separate steps, dropped last: a test may close the store itself, and the second close fails.
    cleanups.push(() => schema.drop(), () => store.close());
    await store.migrate();
    await store.transaction(async (tx) => { await tx.handle.query("CREATE TABLE effects (tenant text NOT NULL, event_id text NOT NULL, n bigint)"); });
    const handler: InboxHandler<Record<string, unknown>, PgClient> = {
      name: HANDLER,
      async handle(event, ctx) {
        await ctx.tx.query("INSERT INTO effects (tenant, event_id, n) VALUES ($1, $2, $3)", [ctx.key.tenant, ctx.key.eventId, event.n ?? null]);
      },
    };
    const rows = async (sql: string) => store.transaction(async (tx) => (await tx.handle.query(sql)).rows);
    return {
      kind, url: schema.url, store, ops: store.operations(), logs, logger,
      pipeline: (options = {}) => new InboxPipeline({ store, handler, logger, ...options } as PipelineOptions<Record<string, unknown>, PgClient>),
      effects: async () => count(await rows("SELECT event_id FROM effects")),
      dedup: async () => new Map((await rows(`SELECT event_id, fingerprint FROM rabbit_inbox_dedup WHERE handler = '${HANDLER}'`)).map((r) => [String(r.event_id), String(r.fingerprint)])),
      rows,
      backdate: async (eventId, ms) => {
        await store.transaction(async (tx) => {
          await tx.handle.query("UPDATE rabbit_inbox_dedup SET first_seen = first_seen - make_interval(secs => $1) WHERE event_id = $2", [ms / 1000, eventId]);
        });
      },
    };
  }
  if (kind === "mysql") return mysqlFixture(logs, logger);
  const file = await createSqliteFile();
  const store = await SqliteStore.open(file.file);
  cleanups.push(() => file.remove(), () => store.close());
  await store.migrate();
  store.database.exec("CREATE TABLE effects (tenant TEXT NOT NULL, event_id TEXT NOT NULL, n INTEGER)");
  const handler: InboxHandler<Record<string, unknown>, SqliteDatabase> = {
    name: HANDLER,
    handle(event, ctx) {
      ctx.tx.prepare("INSERT INTO effects (tenant, event_id, n) VALUES (?, ?, ?)").run(ctx.key.tenant, ctx.key.eventId, event.n ?? null);
      return Promise.resolve();
    },
  };
  const rows = (sql: string) => Promise.resolve(store.database.prepare(sql).all() as Array<Record<string, unknown>>);
  return {
    kind, url: file.file, store, ops: store.operations(), logs, logger,
    pipeline: (options = {}) => new InboxPipeline({ store, handler, logger, ...options } as PipelineOptions<Record<string, unknown>, SqliteDatabase>),
    effects: async () => count(await rows("SELECT event_id FROM effects")),
    dedup: async () => new Map((await rows(`SELECT event_id, fingerprint FROM rabbit_inbox_dedup WHERE handler = '${HANDLER}'`)).map((r) => [String(r.event_id), String(r.fingerprint)])),
    rows,
    backdate: (eventId, ms) => {
      store.database.prepare("UPDATE rabbit_inbox_dedup SET first_seen = first_seen - ? WHERE event_id = ?").run(ms, eventId);
      return Promise.resolve();
    },
  };
}

async function mysqlFixture(logs: LogLine[], logger: Logger): Promise<RetentionFixture> {
  const database = await createMysqlDatabase();
  const store = await MysqlStore.connect(database.url);
  // Plain SQL on a connection of its own: DDL commits implicitly, so never inside the store's transaction.
  const admin = await mysql.createConnection({ uri: database.url, timezone: "Z" });
  cleanups.push(() => database.drop(), () => store.close(), () => admin.end());
  await store.migrate();
  await admin.query(`CREATE TABLE effects (
    tenant VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    event_id VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    n BIGINT) ENGINE=InnoDB`);
  const handler: InboxHandler<Record<string, unknown>, MysqlConnection> = {
    name: HANDLER,
    async handle(event, ctx) {
      await ctx.tx.execute("INSERT INTO effects (tenant, event_id, n) VALUES (?, ?, ?)", [ctx.key.tenant, ctx.key.eventId, (event.n as number | undefined) ?? null]);
    },
  };
  const rows = async (sql: string) => (await admin.query(sql))[0] as Array<Record<string, unknown>>;
  const text = (value: unknown) => (Buffer.isBuffer(value) ? value.toString("utf8") : String(value));
  return {
    kind: "mysql", url: database.url, store, ops: store.operations(), logs, logger,
    pipeline: (options = {}) => new InboxPipeline({ store, handler, logger, ...options } as PipelineOptions<Record<string, unknown>, MysqlConnection>),
    effects: async () => count(await rows("SELECT event_id FROM effects")),
    dedup: async () => new Map((await rows(`SELECT event_id, fingerprint FROM rabbit_inbox_dedup WHERE handler = '${HANDLER}'`)).map((r) => [text(r.event_id), text(r.fingerprint)])),
    rows,
    backdate: async (eventId, ms) => {
      await admin.execute("UPDATE rabbit_inbox_dedup SET first_seen = first_seen - INTERVAL ? MICROSECOND WHERE event_id = ?", [ms * 1000, eventId]);
    },
  };
}

function count(rows: Array<Record<string, unknown>>): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of rows) m.set(String(r.event_id), (m.get(String(r.event_id)) ?? 0) + 1);
  return m;
}

/** A delivery as the AMQP consumer would build it, with the AMQP `timestamp` property when given. */
export function delivery(body: object, options: { timestamp?: Date; queue?: string } = {}): IncomingMessage {
  const m = incomingMessage(body, { queue: options.queue ?? "retention.events" });
  const properties = { contentType: "application/json", ...(options.timestamp ? { timestamp: Math.floor(options.timestamp.getTime() / 1000) } : {}) };
  return {
    ...m,
    delivery: { ...m.delivery, timestamp: options.timestamp ? new Date(Math.floor(options.timestamp.getTime() / 1000) * 1000) : undefined },
    describeProperties: () => JSON.stringify({ fields: { exchange: "", routingKey: options.queue ?? "retention.events", redelivered: false }, properties }),
  };
}

export function event(id: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { tenant: "t1", event_id: id, ...extra };
}
