/**
 * Drives the ledger service the way an operator would: as real child processes against a real
 * broker and database. Shared by `npm run demo` and the integration tests.
 *
 * - LedgerProcess: `node --import tsx examples/ledger/main.ts` with its own environment, its
 *   stdout and JSON stderr captured, waits for `ledger: consuming` / `fault: paused at ...`,
 *   kills it with any signal and reports its exit.
 * - BrokerClient: publishes with publisher confirms, reads queue depth and the quarantine queue,
 *   deletes queues.
 * - runLedgerCli / readLedgerTables: the `ledger` CLI as a subprocess, and the raw tables.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import amqp from "amqplib";
import type { ChannelModel, ConfirmChannel, GetMessage } from "amqplib";

/** The repository root: ledger processes and the CLI run from here, like `npm start`. */
export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

export const DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672";

/** The AMQP URL of the environment, as the tests' global setup reads it. */
export function amqpUrlFromEnv(): string {
  return process.env.TEST_AMQP_URL || process.env.AMQP_URL || DEFAULT_AMQP_URL;
}

export function randomQueueName(prefix = "ledger.test"): string {
  return `${prefix}.${randomBytes(4).toString("hex")}`;
}

/**
 * Every queue a ledger consuming `queue` may declare: the work queue, `<queue>.quarantine` and
 * the delayed-retry queues `<queue>.retry.<n>` (more than the default three, to be safe).
 */
export function ledgerQueueNames(queue: string, partitions = 0): string[] {
  const withRetries = (q: string) => [q, ...Array.from({ length: 6 }, (_, i) => `${q}.retry.${i + 1}`)];
  return [
    ...withRetries(queue), `${queue}.quarantine`,
    ...Array.from({ length: partitions }, (_, p) => withRetries(`${queue}.p${p}`)).flat(),
  ];
}

/** The exchanges a ledger consuming `queue` declares: `<queue>.balance-changed` (its outbox's target). */
export function ledgerExchangeNames(queue: string): string[] {
  return [`${queue}.balance-changed`];
}

/** What a partitioned ledger declares besides: the consistent-hash exchange `<queue>` and `<queue>.members`. */
export function partitionExchangeNames(queue: string): string[] {
  return [queue, `${queue}.members`];
}

/** The routing key producers use on a partitioned ledger: one account's events, one partition. */
export function accountRoutingKey(message: LedgerMessage): string {
  return `${message.tenant}/${message.account_id}`;
}

// ---------------------------------------------------------------------------------------------
// Ledger messages

export interface AccountOpened { type: "account.opened"; tenant: string; event_id: string; account_id: string }
export interface BalanceAdjusted { type: "balance.adjusted"; tenant: string; event_id: string; account_id: string; delta_cents: number }
export type LedgerMessage = AccountOpened | BalanceAdjusted;

export function accountOpened(tenant: string, eventId: string, accountId: string): AccountOpened {
  return { type: "account.opened", tenant, event_id: eventId, account_id: accountId };
}

export function balanceAdjusted(tenant: string, eventId: string, accountId: string, deltaCents: number): BalanceAdjusted {
  return { type: "balance.adjusted", tenant, event_id: eventId, account_id: accountId, delta_cents: deltaCents };
}

// ---------------------------------------------------------------------------------------------
// Waiting

export class HarnessTimeoutError extends Error {
  override name = "HarnessTimeoutError";
}

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/**
 * Polls `check` until it returns something other than undefined. Fails fast when one of
 * `watch` exits first (its output is in the error), and after `timeoutMs` otherwise.
 */
export async function waitUntil<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what: string,
  options: { timeoutMs?: number; intervalMs?: number; watch?: readonly LedgerProcess[] } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    const dead = options.watch?.find((p) => p.exitStatus !== undefined);
    if (dead) throw new Error(`${dead.label} exited (${describeExit(dead.exitStatus!)}) while waiting for ${what}\n${dead.outputTail()}`);
    if (Date.now() > deadline) {
      const tails = (options.watch ?? []).map((p) => p.outputTail()).join("\n");
      throw new HarnessTimeoutError(`timed out after ${options.timeoutMs ?? 20_000} ms waiting for ${what}${tails ? `\n${tails}` : ""}`);
    }
    await sleep(options.intervalMs ?? 25);
  }
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new HarnessTimeoutError(`${what}: no answer within ${ms} ms`)), ms); }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// The ledger service as a child process

export interface LedgerProcessOptions {
  queue: string;
  databaseUrl: string;
  amqpUrl?: string;
  /** RABBIT_INBOX_FAULT, e.g. `after-commit:pause:2`. */
  fault?: string;
  /** LEDGER_BATCH_SIZE. */
  batchSize?: number;
  /** LEDGER_PREFETCH. */
  prefetch?: number;
  /** LEDGER_QUEUE_TYPE (the queue must not exist yet with another type). */
  queueType?: "classic" | "quorum";
  /** LEDGER_PARTITIONS: consume the partitions of the consistent-hash exchange `<queue>`. */
  partitions?: number;
  /** LEDGER_RETRY_DELAYS_MS: the delays of the broker-side retries (short ones keep a test fast). */
  retryDelaysMs?: readonly number[];
  /**
   * RABBIT_INBOX_LOG_LEVEL. Default `debug`: the harness counts settled deliveries from the
   * consumer's `batch settled` debug lines.
   */
  logLevel?: "debug" | "info" | "warn" | "error";
  /** A name for error messages. */
  label?: string;
  /** Default 30 s (a cold tsx start on a busy 2-core machine takes a few seconds). */
  startTimeoutMs?: number;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One JSON log line of the ledger's stderr. */
export interface LogRecord {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export interface Redelivery {
  tenant?: string;
  eventId?: string;
  outcome: keyof SettledCounts;
}

/** Outcome counts as the consumer logs them. `delayed`: republished to a delayed-retry queue. */
export interface SettledCounts {
  applied: number;
  duplicate: number;
  quarantined: number;
  delayed: number;
  requeue: number;
}

const emptyCounts = (): SettledCounts => ({ applied: 0, duplicate: 0, quarantined: 0, delayed: 0, requeue: 0 });

export function describeExit(status: ExitStatus): string {
  return status.signal ? `signal ${status.signal}` : `code ${status.code}`;
}

const live = new Set<LedgerProcess>();

/** SIGKILLs every ledger process this module started that is still running (test teardown). */
export async function killAllLedgerProcesses(): Promise<void> {
  await Promise.all([...live].map((p) => p.kill("SIGKILL")));
}

/**
 * A ledger service process. Started as `node --import tsx examples/ledger/main.ts` rather than
 * through the `tsx` binary: that binary runs the script in a second node process, so a SIGKILL
 * sent to it would leave the real consumer running with its deliveries unacked.
 */
export class LedgerProcess {
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  readonly logs: LogRecord[] = [];
  readonly exited: Promise<ExitStatus>;
  exitStatus: ExitStatus | undefined;

  private constructor(private readonly child: ChildProcess, readonly label: string) {
    live.add(this);
    const lines = (stream: NodeJS.ReadableStream, sink: (line: string) => void) => createInterface({ input: stream, crlfDelay: Infinity }).on("line", sink);
    lines(child.stdout!, (line) => this.stdout.push(line));
    lines(child.stderr!, (line) => {
      this.stderr.push(line);
      const record = parseLogLine(line);
      if (record) this.logs.push(record);
    });
    // 'close' comes after the output streams ended, so every line is in by then.
    this.exited = new Promise((done) => {
      child.once("close", (code, signal) => {
        this.exitStatus = { code, signal };
        live.delete(this);
        done(this.exitStatus);
      });
    });
  }

  /** Spawns the service and waits for its `ledger: consuming` line. */
  static async start(options: LedgerProcessOptions): Promise<LedgerProcess> {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const name of ["RABBIT_INBOX_FAULT", "LEDGER_BATCH_SIZE", "LEDGER_PREFETCH", "LEDGER_QUEUE_TYPE", "LEDGER_PARTITIONS", "LEDGER_RETRY_DELAYS_MS", "NODE_OPTIONS"]) delete env[name];
    Object.assign(env, {
      AMQP_URL: options.amqpUrl ?? amqpUrlFromEnv(),
      DATABASE_URL: options.databaseUrl,
      LEDGER_QUEUE: options.queue,
      RABBIT_INBOX_LOG_LEVEL: options.logLevel ?? "debug",
      ...(options.fault ? { RABBIT_INBOX_FAULT: options.fault } : {}),
      ...(options.batchSize ? { LEDGER_BATCH_SIZE: String(options.batchSize) } : {}),
      ...(options.prefetch ? { LEDGER_PREFETCH: String(options.prefetch) } : {}),
      ...(options.queueType ? { LEDGER_QUEUE_TYPE: options.queueType } : {}),
      ...(options.partitions ? { LEDGER_PARTITIONS: String(options.partitions) } : {}),
      ...(options.retryDelaysMs ? { LEDGER_RETRY_DELAYS_MS: options.retryDelaysMs.join(",") } : {}),
    });
    const child = spawn(process.execPath, ["--import", "tsx", "examples/ledger/main.ts"], {
      cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"],
    });
    const label = options.label ?? `ledger${options.fault ? ` (fault ${options.fault})` : ""} pid ${child.pid ?? "?"}`;
    const p = new LedgerProcess(child, label);
    try {
      await waitUntil(() => p.stdout.find((l) => l.startsWith("ledger: consuming")), `${label} to print "ledger: consuming"`, {
        timeoutMs: options.startTimeoutMs ?? 30_000, watch: [p],
      });
    } catch (error) {
      await p.kill("SIGKILL");
      throw error;
    }
    return p;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Sends `signal` (if still running) and waits for the exit; SIGKILLs after `timeoutMs`. */
  async kill(signal: NodeJS.Signals, timeoutMs = 20_000): Promise<ExitStatus> {
    if (this.exitStatus) return this.exitStatus;
    this.child.kill(signal);
    try {
      return await withTimeout(this.exited, timeoutMs, `${this.label} to exit after ${signal}`);
    } catch (error) {
      this.child.kill("SIGKILL");
      await this.exited;
      throw error;
    }
  }

  /** SIGTERM: the service drains in-flight work and exits 0. */
  stop(timeoutMs?: number): Promise<ExitStatus> {
    return this.kill("SIGTERM", timeoutMs);
  }

  /** Waits for the process to exit by itself (an injected crash). */
  waitForExit(timeoutMs = 20_000): Promise<ExitStatus> {
    return withTimeout(this.exited, timeoutMs, `${this.label} to exit`).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${this.outputTail()}`);
    });
  }

  /** Waits for `fault: paused at <point> <event_id>` on stdout. */
  async waitForPause(timeoutMs = 20_000): Promise<{ point: string; eventId: string }> {
    const match = await waitUntil(() => {
      for (const line of this.stdout) {
        const m = /^fault: paused at (\S+) (\S+)$/.exec(line);
        if (m) return { point: m[1]!, eventId: m[2]! };
      }
      return undefined;
    }, `${this.label} to print "fault: paused at ..."`, { timeoutMs, watch: [this] });
    return match;
  }

  /** Outcome counts of every batch settled so far (from the consumer's `batch settled` debug lines). */
  settledCounts(): SettledCounts {
    const counts = emptyCounts();
    for (const r of this.logs) {
      if (r.msg !== "batch settled") continue;
      for (const k of Object.keys(counts) as Array<keyof SettledCounts>) counts[k] += typeof r[k] === "number" ? r[k] : 0;
    }
    return counts;
  }

  /** Deliveries taken off the work queue so far: acked, quarantined or delayed (requeues excluded). */
  settled(): number {
    const c = this.settledCounts();
    return c.applied + c.duplicate + c.quarantined + c.delayed;
  }

  /** Waits until at least `n` deliveries were settled by this process. */
  async waitForSettled(n: number, timeoutMs = 20_000): Promise<void> {
    await waitUntil(() => (this.settled() >= n ? true : undefined), `${this.label} to settle ${n} deliveries (settled ${this.settled()})`, { timeoutMs, watch: [this] });
  }

  /** Deliveries that arrived with redelivered=true, with their outcomes. */
  redeliveries(): Redelivery[] {
    return this.logs
      .filter((r) => r.msg === "redelivered deliveries settled" && Array.isArray(r.events))
      .flatMap((r) => r.events as Redelivery[]);
  }

  /** The `stopped` line's outcome counts, once the service stopped cleanly. */
  stoppedCounts(): SettledCounts | undefined {
    const r = this.logs.find((l) => l.msg === "stopped");
    if (!r) return undefined;
    const counts = emptyCounts();
    for (const k of Object.keys(counts) as Array<keyof SettledCounts>) counts[k] = typeof r[k] === "number" ? r[k] : 0;
    return counts;
  }

  logsAt(level: string): LogRecord[] {
    return this.logs.filter((r) => r.level === level);
  }

  /** The last lines of output, for error messages. */
  outputTail(lines = 25): string {
    const tail = (name: string, all: string[]) => all.length === 0 ? "" : `--- ${this.label} ${name} (last ${Math.min(lines, all.length)} of ${all.length} lines)\n${all.slice(-lines).join("\n")}\n`;
    return tail("stdout", this.stdout) + tail("stderr", this.stderr);
  }
}

function parseLogLine(line: string): LogRecord | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const value = JSON.parse(line) as unknown;
    if (value && typeof value === "object" && typeof (value as LogRecord).msg === "string") return value as LogRecord;
  } catch {
    // not a JSON log line
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// The broker

export interface QueueState {
  messageCount: number;
  consumerCount: number;
}

/** A test/demo client of the broker: confirmed publishes, queue depth, quarantine reads, cleanup. */
export class BrokerClient {
  private constructor(private readonly connection: ChannelModel, private readonly channel: ConfirmChannel) {}

  /** Connects; rejects with the connection error (ECONNREFUSED, ...) within `timeoutMs`. */
  static async connect(url: string = amqpUrlFromEnv(), options: { timeoutMs?: number } = {}): Promise<BrokerClient> {
    const connection = await amqp.connect(url, { timeout: options.timeoutMs ?? 5000, clientProperties: { connection_name: "rabbit-inbox ledger harness" } });
    connection.on("error", () => undefined);
    try {
      const channel = await connection.createConfirmChannel();
      channel.on("error", () => undefined);
      return new BrokerClient(connection, channel);
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  /** Declares the queue as the ledger does (durable, classic), so publishing may come first. */
  async declare(queue: string): Promise<void> {
    await this.channel.assertQueue(queue, { durable: true });
  }

  /**
   * Publishes persistent messages to `queue` through the default exchange and waits for the
   * broker's confirms. Objects go as JSON; strings and Buffers go as they are (malformed input).
   */
  async publish(queue: string, messages: ReadonlyArray<LedgerMessage | Record<string, unknown> | string | Buffer>): Promise<void> {
    for (const m of messages) {
      const body = Buffer.isBuffer(m) ? m : Buffer.from(typeof m === "string" ? m : JSON.stringify(m), "utf8");
      const ok = this.channel.publish("", queue, body, { persistent: true, contentType: "application/json" });
      if (!ok) await once(this.channel, "drain");
    }
    await withTimeout(this.channel.waitForConfirms(), 30_000, `publisher confirms for ${messages.length} messages`);
  }

  /**
   * Publishes persistent JSON messages to `exchange` (a partitioned ledger's consistent-hash
   * exchange) with the routing key `<tenant>/<account_id>`, and waits for the confirms.
   */
  async publishRouted(exchange: string, messages: readonly LedgerMessage[]): Promise<void> {
    for (const m of messages) {
      const ok = this.channel.publish(exchange, accountRoutingKey(m), Buffer.from(JSON.stringify(m), "utf8"), { persistent: true, contentType: "application/json" });
      if (!ok) await once(this.channel, "drain");
    }
    await withTimeout(this.channel.waitForConfirms(), 30_000, `publisher confirms for ${messages.length} messages`);
  }

  /**
   * Ready messages and consumers of a queue (passive declare on a throwaway channel: a missing
   * queue closes the channel it is checked on). Note: messageCount excludes deliveries a
   * consumer holds unacked.
   */
  async queueState(queue: string): Promise<QueueState> {
    const probe = await this.connection.createChannel();
    probe.on("error", () => undefined);
    try {
      const { messageCount, consumerCount } = await probe.checkQueue(queue);
      return { messageCount, consumerCount };
    } finally {
      await probe.close().catch(() => undefined);
    }
  }

  /** Waits until no message of `queue` is ready (some may still be unacked by a consumer). */
  async waitForNoReady(queue: string, options: { timeoutMs?: number; watch?: readonly LedgerProcess[] } = {}): Promise<void> {
    await waitUntil(async () => ((await this.queueState(queue)).messageCount === 0 ? true : undefined), `queue ${queue} to have no ready messages`, options);
  }

  /**
   * Messages left in `queue` once nothing consumes it. With no consumer, the broker has put every
   * unacked delivery back (it does so in the same step that removes the consumer), so
   * messageCount is then the whole depth: ready + unacknowledged.
   */
  async depthWithoutConsumers(queue: string, timeoutMs = 10_000): Promise<number> {
    const state = await waitUntil(async () => {
      const s = await this.queueState(queue);
      return s.consumerCount === 0 ? s : undefined;
    }, `queue ${queue} to lose its consumers`, { timeoutMs });
    return state.messageCount;
  }

  /** Takes every message currently in `queue` (auto-ack: the caller now owns them). */
  async takeAll(queue: string): Promise<GetMessage[]> {
    const taken: GetMessage[] = [];
    for (;;) {
      const m = await this.channel.get(queue, { noAck: true });
      if (m === false) return taken;
      taken.push(m);
    }
  }

  /** Deletes queues (a missing queue is fine). */
  async deleteQueues(...queues: string[]): Promise<void> {
    for (const queue of queues) {
      const ch = await this.connection.createChannel();
      ch.on("error", () => undefined);
      try {
        await ch.deleteQueue(queue);
      } catch {
        // already gone
      } finally {
        await ch.close().catch(() => undefined);
      }
    }
  }

  /** Deletes exchanges (a missing one is fine). */
  async deleteExchanges(...exchanges: string[]): Promise<void> {
    for (const exchange of exchanges) {
      const ch = await this.connection.createChannel();
      ch.on("error", () => undefined);
      try {
        await ch.deleteExchange(exchange);
      } catch {
        // already gone
      } finally {
        await ch.close().catch(() => undefined);
      }
    }
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined);
  }
}

/** A header of a message read from the quarantine queue, as text. */
export function headerText(message: GetMessage, name: string): string | undefined {
  const value: unknown = message.properties.headers?.[name];
  if (value === undefined || value === null) return undefined;
  if (Buffer.isBuffer(value)) return value.toString("utf8");
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean" ? String(value) : JSON.stringify(value);
}

// ---------------------------------------------------------------------------------------------
// The CLI and the tables

export interface CliBalance { tenant: string; account_id: string; balance_cents: number }
export interface CliQuarantine { id: number; tenant: string | null; event_id: string | null; reason: string }

/** Runs `npm run --silent ledger -- <args>` with DATABASE_URL; rejects on a non-zero exit. */
export function runLedgerCli(args: readonly string[], databaseUrl: string): Promise<string> {
  return new Promise((done, fail) => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl };
    delete env.NODE_OPTIONS;
    execFile("npm", ["run", "--silent", "ledger", "--", ...args], { cwd: REPO_ROOT, env, timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) fail(new Error(`npm run --silent ledger -- ${args.join(" ")} failed: ${error.message}\n${stderr}`));
      else done(stdout);
    });
  });
}

async function runLedgerCliJson<T>(command: string, databaseUrl: string): Promise<T> {
  const out = await runLedgerCli([command, "--json"], databaseUrl);
  try {
    return JSON.parse(out) as T;
  } catch {
    throw new Error(`ledger ${command} --json printed something that is not JSON: ${out.slice(0, 500)}`);
  }
}

/** `npm run --silent ledger -- balances --json`. */
export function cliBalances(databaseUrl: string): Promise<CliBalance[]> {
  return runLedgerCliJson("balances", databaseUrl);
}

/** `npm run --silent ledger -- quarantine --json`. */
export function cliQuarantine(databaseUrl: string): Promise<CliQuarantine[]> {
  return runLedgerCliJson("quarantine", databaseUrl);
}

export interface InboxRow { tenant: string; handler: string; event_id: string; fingerprint: string }
export interface QuarantineRow {
  handler: string;
  tenant: string | null;
  event_id: string | null;
  reason: string;
  detail: string;
  fingerprint: string | null;
  stored_fingerprint: string | null;
  occurrences: number;
  queue: string;
  body: Buffer;
}
export interface LedgerTables {
  inbox: InboxRow[];
  quarantine: QuarantineRow[];
  accounts: CliBalance[];
}

const isPostgresUrl = (url: string) => /^postgres(ql)?:\/\//i.test(url);
const isMysqlUrl = (url: string) => /^(mysql|mariadb):\/\//i.test(url);

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Same order on every database (code-point order, whatever the collation). */
function sorted(tables: LedgerTables): LedgerTables {
  tables.inbox.sort((a, b) => byText(a.tenant, b.tenant) || byText(a.handler, b.handler) || byText(a.event_id, b.event_id));
  tables.accounts.sort((a, b) => byText(a.tenant, b.tenant) || byText(a.account_id, b.account_id));
  return tables;
}

/** Where an SQLite DATABASE_URL points, resolved like the service does (from the repo root). */
export function sqlitePathOf(databaseUrl: string): string {
  return resolve(REPO_ROOT, databaseUrl.replace(/^(sqlite|file):(\/\/)?/i, ""));
}

/**
 * Reads the inbox, quarantine and account tables with plain SQL, independently of the store
 * code under test. Rows are ordered so that comparisons are stable.
 */
export async function readLedgerTables(databaseUrl: string): Promise<LedgerTables> {
  const inboxSql = "SELECT tenant, handler, event_id, fingerprint FROM rabbit_inbox_dedup";
  const quarantineSql = `SELECT handler, tenant, event_id, reason, detail, fingerprint, stored_fingerprint, occurrences, queue, body
    FROM rabbit_inbox_quarantine ORDER BY id`;
  if (isPostgresUrl(databaseUrl)) {
    const { default: pg } = await import("pg");
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const inbox = (await client.query<InboxRow>(inboxSql)).rows;
      const quarantine = (await client.query<QuarantineRow>(quarantineSql)).rows.map((r) => ({ ...r, occurrences: Number(r.occurrences) }));
      const accounts = (await client.query<{ tenant: string; account_id: string; b: string }>(
        "SELECT tenant, account_id, balance_cents::text AS b FROM ledger_accounts",
      )).rows.map((r) => ({ tenant: r.tenant, account_id: r.account_id, balance_cents: Number(r.b) }));
      return sorted({ inbox, quarantine, accounts });
    } finally {
      await client.end();
    }
  }
  if (isMysqlUrl(databaseUrl)) return readMysqlLedgerTables(databaseUrl.replace(/^mariadb:/i, "mysql:"), inboxSql, quarantineSql);
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(sqlitePathOf(databaseUrl), { fileMustExist: true, timeout: 10_000 });
  try {
    const inbox = db.prepare(inboxSql).all() as InboxRow[];
    const quarantine = (db.prepare(quarantineSql).all() as QuarantineRow[]).map((r) => ({ ...r, occurrences: Number(r.occurrences) }));
    const accounts = (db.prepare("SELECT tenant, account_id, balance_cents FROM ledger_accounts").all() as CliBalance[])
      .map((r) => ({ ...r, balance_cents: Number(r.balance_cents) }));
    return sorted({ inbox, quarantine, accounts });
  } finally {
    db.close();
  }
}

/** MySQL/MariaDB text: the store's dedup key columns are VARBINARY, so mysql2 returns Buffers there. */
function mysqlText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
}

function mysqlNullableText(value: unknown): string | null {
  return value === null || value === undefined ? null : mysqlText(value);
}

async function readMysqlLedgerTables(databaseUrl: string, inboxSql: string, quarantineSql: string): Promise<LedgerTables> {
  const { default: mysql } = await import("mysql2/promise");
  const connection = await mysql.createConnection(databaseUrl);
  type Rows = Array<Record<string, unknown>>;
  const rows = async (sql: string) => (await connection.query(sql))[0] as Rows;
  try {
    const inbox = (await rows(inboxSql)).map((r) => ({
      tenant: mysqlText(r.tenant), handler: mysqlText(r.handler), event_id: mysqlText(r.event_id), fingerprint: mysqlText(r.fingerprint),
    }));
    const quarantine = (await rows(quarantineSql)).map((r) => ({
      handler: mysqlText(r.handler), tenant: mysqlNullableText(r.tenant), event_id: mysqlNullableText(r.event_id),
      reason: mysqlText(r.reason), detail: mysqlText(r.detail),
      fingerprint: mysqlNullableText(r.fingerprint), stored_fingerprint: mysqlNullableText(r.stored_fingerprint),
      occurrences: Number(r.occurrences), queue: mysqlText(r.queue),
      body: Buffer.isBuffer(r.body) ? r.body : Buffer.from(mysqlText(r.body), "utf8"),
    }));
    // BIGINT as text: mysql2 would return a JavaScript number that loses digits beyond 2^53.
    const accounts = (await rows("SELECT tenant, account_id, CAST(balance_cents AS CHAR) AS b FROM ledger_accounts")).map((r) => ({
      tenant: mysqlText(r.tenant), account_id: mysqlText(r.account_id), balance_cents: Number(mysqlText(r.b)),
    }));
    return sorted({ inbox, quarantine, accounts });
  } finally {
    await connection.end();
  }
}
