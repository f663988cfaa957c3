import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { REPO_ROOT, amqpUrlFromEnv } from "./ledger-environment.js";
import { nodeEntryArgs } from "./node-entry.js";
import { type ExitStatus, waitUntil, withTimeout } from "./wait-until.js";

/**
 * The ledger service as a child process, the way an operator runs it:
 * `node --import tsx examples/ledger/main.ts` (or the Nest ledger's main.ts) with its own environment, its stdout and JSON
 * stderr captured; waits for `ledger: consuming` / `fault: paused at ...`, counts settled
 * deliveries from the consumer's logs, kills it with any signal and reports its exit.
 */

/** The ledger services that keep the contract: `npm start` and `npm run start:nest`. */
export const LEDGER_ENTRIES = { ledger: "examples/ledger/main.ts", nest: "examples/nest-ledger/main.ts" } as const;

export interface LedgerProcessOptions {
  /** Which service: `ledger` (default, `npm start`) or `nest` (`npm run start:nest`, TypeORM: PostgreSQL or MySQL only). */
  app?: keyof typeof LEDGER_ENTRIES;
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
  /** LEDGER_OUTBOX_MAX_PENDING: pause consumption while the outbox holds this many unsent rows. */
  outboxMaxPending?: number;
  /** LEDGER_OUTBOX_SENT_RETENTION_MS: keep sent outbox rows this long (default 0: deleted once confirmed). */
  outboxSentRetentionMs?: number;
  /** LEDGER_METRICS_PORT (0: any free port; the process prints the one it took). */
  metricsPort?: number;
  /** A name for error messages. */
  label?: string;
  /** Default 30 s (a cold tsx start on a busy 2-core machine takes a few seconds). */
  startTimeoutMs?: number;
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

const live = new Set<LedgerProcess>();

/** SIGKILLs every ledger process this module started that is still running (test teardown). */
export async function killAllLedgerProcesses(): Promise<void> {
  await Promise.all([...live].map((p) => p.kill("SIGKILL")));
}

/**
 * A ledger service process. Started as `node --import tsx examples/ledger/main.ts` rather than
 * through the `tsx` binary: that binary runs the script in a second node process, so a SIGKILL
 * sent to it would leave the real consumer running with its deliveries unacked. The test run
 * starts the same entry compiled instead (see node-entry.ts).
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
    for (const name of ["RABBIT_INBOX_FAULT", "LEDGER_BATCH_SIZE", "LEDGER_PREFETCH", "LEDGER_QUEUE_TYPE", "LEDGER_PARTITIONS", "LEDGER_RETRY_DELAYS_MS", "LEDGER_OUTBOX_MAX_PENDING", "LEDGER_OUTBOX_SENT_RETENTION_MS", "LEDGER_METRICS_PORT", "LEDGER_METRICS_HOST", "NODE_OPTIONS"]) delete env[name];
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
      ...(options.metricsPort !== undefined ? { LEDGER_METRICS_PORT: String(options.metricsPort) } : {}),
      ...(options.outboxMaxPending !== undefined ? { LEDGER_OUTBOX_MAX_PENDING: String(options.outboxMaxPending) } : {}),
      ...(options.outboxSentRetentionMs !== undefined ? { LEDGER_OUTBOX_SENT_RETENTION_MS: String(options.outboxSentRetentionMs) } : {}),
    });
    const child = spawn(process.execPath, nodeEntryArgs(LEDGER_ENTRIES[options.app ?? "ledger"]), {
      cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"],
    });
    const label = options.label ?? `${options.app === "nest" ? "nest ledger" : "ledger"}${options.fault ? ` (fault ${options.fault})` : ""} pid ${child.pid ?? "?"}`;
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

  /** The base URL of the metrics server, from the line the process printed at start (LEDGER_METRICS_PORT set). */
  get metricsUrl(): string | undefined {
    return /^ledger: metrics on (\S+)\/metrics/.exec(this.stdout.find((l) => l.startsWith("ledger: metrics on ")) ?? "")?.[1];
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
