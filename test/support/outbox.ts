import { randomBytes } from "node:crypto";
import { type Server, type Socket, connect, createServer } from "node:net";
import amqp from "amqplib";
import type { ChannelModel, ConsumeMessage } from "amqplib";
import mysql from "mysql2/promise";
import pg from "pg";
import Database from "better-sqlite3";
import { OutboxRelay, databaseTargetOf } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { type MysqlConnection, MysqlStore } from "../../src/store/mysql/index.js";
import { type PgClient, PostgresStore } from "../../src/store/postgres/index.js";
import { SqliteStore } from "../../src/store/sqlite/index.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import { amqpUrl } from "./broker.js";
import { createMysqlDatabase, createPgSchema, createSqliteFile } from "./databases.js";
import type { TestDatabaseKind } from "./test-databases.js";

/**
 * Support for the outbox integration tests: a database per test (PostgreSQL schema, MySQL/MariaDB
 * database or SQLite file) with the outbox table read by plain SQL, a tap that records what
 * reaches an exchange, and a TCP proxy in front of the broker that a test can cut and restore.
 */

/** A store with an outbox, as the outbox tests open them. */
export type OutboxTestStore = PostgresStore | SqliteStore | MysqlStore;

/** An outbox row as the tests read it, independently of the store code under test. */
export interface OutboxTableRow {
  id: number;
  message_id: string;
  exchange: string;
  ordering_key: string | null;
  source_event_id: string | null;
  sent: boolean;
  attempts: number;
  last_error: string | null;
  /** Present (true) for a message waiting in a packed row (PostgreSQL), not in a row of its own. */
  packed?: true;
}

export interface OutboxTestDatabase {
  kind: TestDatabaseKind;
  /** DATABASE_URL for child processes: a search_path URL, a MySQL database URL or the SQLite file. */
  url: string;
  /** Opens another store on the same database (another "process"). */
  open(): Promise<OutboxTestStore>;
  rows(): Promise<OutboxTableRow[]>;
  /** Runs SQL directly (test setup such as "un-send" a row), with `?`-free literal text. */
  exec(sql: string): Promise<void>;
  remove(): Promise<void>;
}

const OUTBOX_ROWS_SQL = "SELECT id, message_id, exchange, ordering_key, source_event_id, sent_at IS NOT NULL AS sent, attempts, last_error FROM rabbit_inbox_outbox ORDER BY id";
/**
 * On PostgreSQL, the messages a relay publishes from memory may wait in packed rows (one row per
 * transaction, each column an array): they are pending rows too, marked `packed`.
 */
const POSTGRES_OUTBOX_ROWS_SQL = `SELECT id, message_id, exchange, ordering_key, source_event_id, sent_at IS NOT NULL AS sent, attempts, last_error, false AS packed
    FROM rabbit_inbox_outbox
  UNION ALL
  SELECT u.id, u.message_id, u.exchange, u.ordering_key, u.source_event_id, false, 0, NULL, true
    FROM rabbit_inbox_outbox_packed pk
    CROSS JOIN LATERAL unnest(pk.ids, pk.message_ids, pk.exchanges, pk.ordering_keys, pk.source_event_ids) AS u(id, message_id, exchange, ordering_key, source_event_id)
  ORDER BY id`;

/** Plain-SQL access to the outbox table of a DATABASE_URL (postgres://..., mysql://... or an SQLite file). */
export function outboxTableAt(url: string): Pick<OutboxTestDatabase, "rows" | "exec"> {
  const target = databaseTargetOf(url);
  if (target.kind === "mysql") {
    const query = async (sql: string): Promise<Array<Record<string, unknown>>> => {
      const connection = await mysql.createConnection(target.address);
      try {
        return (await connection.query(sql))[0] as Array<Record<string, unknown>>;
      } finally {
        await connection.end();
      }
    };
    return {
      rows: async () => (await query(OUTBOX_ROWS_SQL)).map(normalizeRow),
      exec: async (sql) => { await query(sql); },
    };
  }
  if (target.kind === "postgres") {
    const query = async (sql: string): Promise<Array<Record<string, unknown>>> => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query<Record<string, unknown>>(sql)).rows;
      } finally {
        await client.end();
      }
    };
    return {
      rows: async () => (await query(POSTGRES_OUTBOX_ROWS_SQL)).map(normalizeRow),
      exec: async (sql) => { await query(sql); },
    };
  }
  const withDb = <T>(work: (db: Database.Database) => T): T => {
    const db = new Database(target.address, { timeout: 5000 });
    try {
      return work(db);
    } finally {
      db.close();
    }
  };
  return {
    rows: () => Promise.resolve(withDb((db) => (db.prepare(OUTBOX_ROWS_SQL).all() as Array<Record<string, unknown>>).map(normalizeRow))),
    exec: (sql) => { withDb((db) => db.exec(sql)); return Promise.resolve(); },
  };
}

export async function createOutboxDatabase(kind: TestDatabaseKind): Promise<OutboxTestDatabase> {
  if (kind === "postgres") {
    const schema = await createPgSchema();
    return {
      kind, url: schema.url, ...outboxTableAt(schema.url),
      open: () => PostgresStore.connect(schema.url, { poolSize: 4 }),
      remove: () => schema.drop(),
    };
  }
  if (kind === "mysql") {
    const database = await createMysqlDatabase();
    return {
      kind, url: database.url, ...outboxTableAt(database.url),
      open: () => MysqlStore.connect(database.url, { poolSize: 4 }),
      remove: () => database.drop(),
    };
  }
  const file = await createSqliteFile();
  return {
    kind, url: file.file, ...outboxTableAt(file.file),
    open: () => SqliteStore.open(file.file),
    remove: () => file.remove(),
  };
}

/**
 * A one-column business table (`id` primary key) for the outbox tests, on whichever database
 * the test runs: created outside any inbox transaction (DDL commits implicitly on MySQL),
 * written through a transaction's handle, read back sorted.
 */
export interface IdTable {
  create(): Promise<void>;
  insert(tx: unknown, id: string): Promise<void>;
  list(): Promise<string[]>;
}

export function idTable(db: OutboxTestDatabase, store: OutboxTestStore, table: string): IdTable {
  if (store instanceof SqliteStore) {
    return {
      create: () => { store.database.exec(`CREATE TABLE ${table} (id TEXT PRIMARY KEY)`); return Promise.resolve(); },
      insert: (tx, id) => { (tx as SqliteStore["database"]).prepare(`INSERT INTO ${table} (id) VALUES (?)`).run(id); return Promise.resolve(); },
      list: () => Promise.resolve((store.database.prepare(`SELECT id FROM ${table} ORDER BY id`).all() as Array<{ id: string }>).map((r) => r.id)),
    };
  }
  if (store instanceof MysqlStore) {
    return {
      create: () => db.exec(`CREATE TABLE ${table} (id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY) ENGINE=InnoDB`),
      insert: async (tx, id) => { await (tx as MysqlConnection).execute(`INSERT INTO ${table} (id) VALUES (?)`, [id]); },
      list: () => store.transaction(async (tx) => ((await tx.handle.query(`SELECT id FROM ${table} ORDER BY id`))[0] as Array<{ id: string }>).map((r) => r.id)),
    };
  }
  return {
    create: () => store.transaction(async (tx) => { await tx.handle.query(`CREATE TABLE ${table} (id text PRIMARY KEY)`); }),
    insert: async (tx, id) => { await (tx as PgClient).query(`INSERT INTO ${table} (id) VALUES ($1)`, [id]); },
    list: () => store.transaction(async (tx) => (await tx.handle.query(`SELECT id FROM ${table} ORDER BY id`)).rows.map((r) => String(r.id))),
  };
}

/** What a test of a handler's publishes stands on; see `publishingDatabase`. */
export interface PublishingDatabase {
  db: OutboxTestDatabase;
  store: OutboxTestStore;
  /** A business table the handler writes each event's id to. */
  accounts: IdTable;
  exchange: string;
  /** What reaches `exchange`. */
  tap: ExchangeTap;
}

/**
 * A migrated database with an `accounts` table, and downstream of it an exchange with a tap and
 * a running relay: a handler's publishes arrive in the tap. What undoes each is pushed onto
 * `cleanups`, to be run in reverse order.
 */
export async function publishingDatabase(kind: TestDatabaseKind, exchangePrefix: string, cleanups: Array<() => Promise<unknown>>): Promise<PublishingDatabase> {
  const db = await createOutboxDatabase(kind);
  cleanups.push(() => db.remove());
  const store = await db.open();
  cleanups.push(() => store.close());
  await store.migrate();
  const accounts = idTable(db, store, "accounts");
  await accounts.create();
  const exchange = randomExchangeName(exchangePrefix);
  const tap = await ExchangeTap.open(exchange);
  cleanups.push(() => deleteExchanges(exchange), () => tap.close());
  const relay = new OutboxRelay({ url: amqpUrl, store, logger: silentLogger, pollIntervalMs: 100, cleanupIntervalMs: 0 });
  await relay.start();
  cleanups.push(() => relay.stop());
  return { db, store, accounts, exchange, tap };
}

/** MySQL's VARBINARY columns come back as Buffers. */
const text = (value: unknown): string | null => {
  if (value === null || value === undefined) return null;
  if (Buffer.isBuffer(value)) return value.toString("utf8");
  if (typeof value === "string") return value;
  throw new TypeError(`outbox column: expected text, got ${typeof value}`);
};

function normalizeRow(r: Record<string, unknown>): OutboxTableRow {
  return {
    id: Number(r.id), message_id: text(r.message_id)!, exchange: text(r.exchange)!,
    ordering_key: text(r.ordering_key), source_event_id: text(r.source_event_id),
    sent: Boolean(Number(r.sent)), attempts: Number(r.attempts), last_error: text(r.last_error),
    ...(r.packed === true ? { packed: true as const } : {}),
  };
}

export function randomExchangeName(prefix = "outbox.test"): string {
  return `${prefix}.${randomBytes(4).toString("hex")}`;
}

/** A message as received by a tap. */
export interface TappedMessage {
  messageId: string | undefined;
  body: Buffer;
  json: unknown;
  deliveryMode: number | undefined;
  contentType: string | undefined;
  headers: Record<string, unknown>;
  timestamp: number | undefined;
  receivedAt: number;
}

/**
 * An exclusive queue bound to an exchange, recording every message that reaches it. The
 * exchange is declared (fanout, durable) unless `declare` is false.
 */
export class ExchangeTap {
  readonly messages: TappedMessage[] = [];
  private channel: amqp.Channel | undefined;

  private constructor(private readonly connection: ChannelModel, readonly queue: string, readonly exchange: string) {}

  static async open(exchange: string, options: { declare?: boolean; type?: string; bindingKey?: string } = {}): Promise<ExchangeTap> {
    const connection = await amqp.connect(amqpUrl);
    connection.on("error", () => undefined);
    const channel = await connection.createChannel();
    channel.on("error", () => undefined);
    if (options.declare ?? true) await channel.assertExchange(exchange, options.type ?? "fanout", { durable: true });
    const { queue } = await channel.assertQueue("", { exclusive: true, autoDelete: true });
    await channel.bindQueue(queue, exchange, options.bindingKey ?? "#");
    const tap = new ExchangeTap(connection, queue, exchange);
    tap.channel = channel;
    await channel.consume(queue, (m: ConsumeMessage | null) => {
      if (!m) return;
      let json: unknown;
      try { json = JSON.parse(m.content.toString("utf8")); } catch { json = undefined; }
      tap.messages.push({
        messageId: typeof m.properties.messageId === "string" ? m.properties.messageId : undefined,
        body: m.content, json,
        deliveryMode: typeof m.properties.deliveryMode === "number" ? m.properties.deliveryMode : undefined,
        contentType: typeof m.properties.contentType === "string" ? m.properties.contentType : undefined,
        headers: m.properties.headers ?? {},
        timestamp: typeof m.properties.timestamp === "number" ? m.properties.timestamp : undefined,
        receivedAt: Date.now(),
      });
    }, { noAck: true });
    return tap;
  }

  /** Binds the tap's queue with another key (topic and direct exchanges). */
  async bind(bindingKey: string): Promise<void> {
    await this.channel!.bindQueue(this.queue, this.exchange, bindingKey);
  }

  /** How many times each message id arrived. */
  countsById(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const m of this.messages) counts.set(m.messageId ?? "<none>", (counts.get(m.messageId ?? "<none>") ?? 0) + 1);
    return counts;
  }

  async waitForCount(n: number, timeoutMs = 20_000): Promise<TappedMessage[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.messages.length < n) {
      if (Date.now() > deadline) throw new Error(`tap on ${this.exchange}: ${this.messages.length} of ${n} messages after ${timeoutMs} ms`);
      await sleep(20);
    }
    return this.messages;
  }

  /** Deletes the exchange too when asked. */
  async close(options: { deleteExchange?: boolean } = {}): Promise<void> {
    if (options.deleteExchange) {
      const ch = await this.connection.createChannel().catch(() => undefined);
      if (ch) {
        ch.on("error", () => undefined);
        await ch.deleteExchange(this.exchange).catch(() => undefined);
      }
    }
    await this.connection.close().catch(() => undefined);
  }
}

/** Declares exchanges (fanout, durable) on a short-lived connection. */
export async function declareExchanges(...names: string[]): Promise<void> {
  const connection = await amqp.connect(amqpUrl);
  try {
    const channel = await connection.createChannel();
    for (const name of names) await channel.assertExchange(name, "fanout", { durable: true });
  } finally {
    await connection.close();
  }
}

export async function deleteExchanges(...names: string[]): Promise<void> {
  const connection = await amqp.connect(amqpUrl);
  connection.on("error", () => undefined);
  try {
    for (const name of names) {
      const channel = await connection.createChannel();
      channel.on("error", () => undefined);
      await channel.deleteExchange(name).catch(() => undefined);
      await channel.close().catch(() => undefined);
    }
  } finally {
    await connection.close().catch(() => undefined);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Claims until one claim holds `rows` rows: a claim that runs as a lease ends may see some rows
 * due and not yet the others, and it gives them back. Returns that claim, still open.
 */
export function claimWhenWhole<C extends { rows: readonly unknown[]; settle(s: { sent: never[]; failed: never[] }): Promise<void> }>(
  claim: () => Promise<C | null>, rows: number, what: string,
): Promise<C> {
  return eventually(async () => {
    const c = await claim();
    if (c && c.rows.length < rows) await c.settle({ sent: [], failed: [] });
    return c && c.rows.length === rows ? c : undefined;
  }, what, 10_000);
}

/** Polls `check` until it returns something other than undefined; fails after `timeoutMs`, naming `what`. */
export function eventually<T>(check: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  return waitUntil(check, what, { timeoutMs });
}

/**
 * A TCP proxy in front of the broker (node:net). `stop()` resets every proxied connection and
 * stops listening, as a broker that went away; `start()` listens again on the same port.
 */
export class BrokerProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly target = new URL(amqpUrl)) {}

  /** The AMQP URL through the proxy. */
  get url(): string {
    const url = new URL(this.target.toString());
    url.hostname = "127.0.0.1";
    url.port = String(this.port);
    return url.toString();
  }

  async start(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => {
      const upstream = connect({ host: this.target.hostname || "127.0.0.1", port: Number(this.target.port || 5672) });
      this.sockets.add(client);
      this.sockets.add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on("error", drop);
      upstream.on("error", drop);
      client.on("close", drop);
      upstream.on("close", drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.resetAndDestroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
