import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach } from "vitest";
import { ledgerExchangeNames, ledgerQueueNames } from "../../examples/ledger/driver/ledger-topology.js";
import { compiledEntry, nodeEntryArgs } from "../../examples/ledger/driver/node-entry.js";
import { amqpUrl, deleteQueues, withChannel } from "./broker.js";

/** The repository root: the command and the ledger run from here, as an operator would. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The timeout of a test that runs `rabbit-inbox` many times: each run is a process of its own
 * (about a second through tsx), and a loaded machine takes several times that.
 */
export const CLI_TEST_TIMEOUT_MS = 180_000;

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment of a child process: this one's, without settings that would leak into it, and
 * with AMQP_URL set to the tests' broker (TEST_AMQP_URL), so that a command that publishes (a
 * replay) or checks the broker (doctor) reaches the broker the test set up, unless `extra` names another.
 */
function childEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["NODE_OPTIONS", "DATABASE_URL", "AMQP_URL", "RABBIT_INBOX_REPLAY_WINDOW", "RABBIT_INBOX_ACTOR", "RABBIT_INBOX_FAULT", "LEDGER_QUEUE", "LEDGER_RETRY_DELAYS_MS", "LEDGER_SINK_QUEUE"]) delete env[name];
  env.AMQP_URL = amqpUrl;
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) env[k] = v;
  return env;
}

/** The node arguments that start the command: its compiled entry when there is one, else the launcher. */
function cliEntry(): string[] {
  return [compiledEntry("src/cli/main.ts") ?? join(ROOT, "bin/rabbit-inbox.js")];
}

/**
 * Runs the `rabbit-inbox` command as a subprocess: `npx rabbit-inbox ...` (the package's bin, as
 * in a fresh clone) or, faster, `node bin/rabbit-inbox.js ...` (the same launcher), or the
 * command's compiled entry when the test run compiled the repository (see node-entry.ts): what
 * an installed package runs.
 */
export function runRabbitInbox(args: readonly string[], env: Record<string, string | undefined> = {}, options: { npx?: boolean; timeoutMs?: number } = {}): Promise<CliRun> {
  const [command, argv] = options.npx ? ["npx", ["--no-install", "rabbit-inbox", ...args]] : [process.execPath, [...cliEntry(), ...args]];
  return new Promise((done, fail) => {
    const child = spawn(command, argv, { cwd: ROOT, env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => { stdout += chunk.toString("utf8"); });
    child.stderr.on("data", (chunk: Buffer) => { stderr += chunk.toString("utf8"); });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(new Error(`rabbit-inbox ${args.join(" ")} did not finish within ${options.timeoutMs ?? 60_000} ms\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.once("error", (error) => { clearTimeout(timer); fail(error); });
    child.once("close", (code) => { clearTimeout(timer); done({ code, stdout, stderr }); });
  });
}

/** Starts the command (`node bin/rabbit-inbox.js ...`, or its compiled entry) and hands back the process, e.g. to kill it mid-way. */
export function spawnRabbitInbox(args: readonly string[], env: Record<string, string | undefined> = {}): ChildProcess {
  return spawn(process.execPath, [...cliEntry(), ...args], { cwd: ROOT, env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
}

/** Runs the command and parses its stdout as JSON; fails with the output when it exits non-zero. */
export async function rabbitInboxJson<T>(args: readonly string[], env: Record<string, string | undefined>): Promise<T> {
  const run = await runRabbitInbox([...args, "--json"], env);
  if (run.code !== 0) throw new Error(`rabbit-inbox ${args.join(" ")} exited ${run.code}\n${run.stdout}\n${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}

/**
 * The broker side of a ledger on `queue`: a sink queue bound to its `balance.changed` exchange (so
 * its outbox relay has somewhere to publish and logs no errors), and a cleanup that removes every
 * queue and exchange the ledger declares.
 */
export async function ledgerTopology(queue: string): Promise<() => Promise<void>> {
  const exchanges = ledgerExchangeNames(queue);
  const sinks = exchanges.map((e) => `${e}.sink`);
  await withChannel(async (ch) => {
    for (const exchange of exchanges) {
      await ch.assertExchange(exchange, "fanout", { durable: true });
      await ch.assertQueue(`${exchange}.sink`, { durable: true });
      await ch.bindQueue(`${exchange}.sink`, exchange, "");
    }
  });
  return async () => {
    await deleteQueues(...ledgerQueueNames(queue), ...sinks);
    for (const exchange of exchanges) await withChannel((ch) => ch.deleteExchange(exchange)).catch(() => undefined);
  };
}

export interface LogRecord { level: string; msg: string; [field: string]: unknown }

/**
 * The ledger service started as `npm start` starts it: `node --import tsx
 * examples/ledger/main.ts` (or, in a test run, that entry compiled: see node-entry.ts) with
 * AMQP_URL, DATABASE_URL and LEDGER_QUEUE. Its JSON log lines are collected (debug level, so
 * every settled batch is visible).
 */
export class LedgerService {
  readonly stdout: string[] = [];
  readonly logs: LogRecord[] = [];
  readonly stderr: string[] = [];
  private exit: Promise<number | null>;

  private constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on("line", (line) => this.stdout.push(line));
    createInterface({ input: child.stderr! }).on("line", (line) => {
      this.stderr.push(line);
      if (!line.startsWith("{")) return;
      try {
        this.logs.push(JSON.parse(line) as LogRecord);
      } catch {
        // not a log line
      }
    });
    this.exit = new Promise((done) => child.once("close", (code) => done(code)));
  }

  static async start(options: { queue: string; databaseUrl: string; env?: Record<string, string> }): Promise<LedgerService> {
    const child = spawn(process.execPath, nodeEntryArgs("examples/ledger/main.ts"), {
      cwd: ROOT, stdio: ["ignore", "pipe", "pipe"],
      env: childEnv({ AMQP_URL: amqpUrl, DATABASE_URL: options.databaseUrl, LEDGER_QUEUE: options.queue, RABBIT_INBOX_LOG_LEVEL: "debug", ...options.env }),
    });
    const service = new LedgerService(child);
    running.add(service);
    const deadline = Date.now() + 30_000;
    while (!service.stdout.some((l) => l.startsWith("ledger: consuming"))) {
      if (service.child.exitCode !== null || Date.now() > deadline) {
        await service.stop();
        throw new Error(`the ledger did not start\n${service.stdout.join("\n")}\n${service.stderr.slice(-20).join("\n")}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return service;
  }

  /** Deliveries settled so far, by outcome (from the consumer's `batch settled` lines). */
  settled(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const r of this.logs) {
      if (r.msg !== "batch settled") continue;
      for (const k of ["applied", "duplicate", "quarantined", "delayed", "requeue"]) counts[k] = (counts[k] ?? 0) + (typeof r[k] === "number" ? r[k] : 0);
    }
    return counts;
  }

  total(): number {
    return Object.values(this.settled()).reduce((a, b) => a + b, 0);
  }

  async waitForSettled(n: number, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.total() < n) {
      if (Date.now() > deadline) throw new Error(`the ledger settled ${this.total()} of ${n} deliveries\n${this.stderr.slice(-20).join("\n")}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** SIGTERM (the ledger drains and exits 0); SIGKILL after 20 s. */
  async stop(): Promise<number | null> {
    running.delete(this);
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 20_000);
    try {
      return await this.exit;
    } finally {
      clearTimeout(timer);
    }
  }
}

const running = new Set<LedgerService>();
afterEach(async () => {
  await Promise.all([...running].map((s) => s.stop()));
});
