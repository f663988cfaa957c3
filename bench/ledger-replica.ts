/**
 * One replica of the ledger service as the scale-out benchmark runs it: the compiled
 * `examples/ledger/main.js` (built next to this file by tsconfig.bench.json) in its own node
 * process, as a user runs the service, with its JSON log lines kept together with the moment
 * this process read them, so that rebalance and failover times come from what the replicas say.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

/** The compiled ledger service, relative to this compiled file (.bench/dist/bench/). */
const LEDGER_MAIN = fileURLToPath(new URL("../examples/ledger/main.js", import.meta.url));

export interface ReplicaOptions {
  label: string;
  queue: string;
  databaseUrl: string;
  /** AMQP_URL: the cluster's nodes, comma-separated; the service connects to the first that answers. */
  amqpUrl: string;
  partitions: number;
}

export interface ReplicaLogLine {
  /** performance.now() when this process read the line. */
  at: number;
  record: Record<string, unknown> & { msg: string };
}

export interface ReplicaExit { code: number | null; signal: NodeJS.Signals | null }

export class LedgerReplica {
  readonly logs: ReplicaLogLine[] = [];
  readonly otherOutput: string[] = [];
  readonly exited: Promise<ReplicaExit>;
  exit: ReplicaExit | undefined;
  private readonly listeners = new Set<() => void>();

  private constructor(private readonly child: ChildProcess, readonly label: string, readonly startedAt: number) {
    createInterface({ input: child.stderr!, crlfDelay: Infinity }).on("line", (line) => this.read(line));
    createInterface({ input: child.stdout!, crlfDelay: Infinity }).on("line", (line) => this.otherOutput.push(line));
    this.exited = new Promise((resolve) => {
      child.once("close", (code, signal) => {
        this.exit = { code, signal };
        this.notify();
        resolve(this.exit);
      });
    });
  }

  /** Spawns the service; it connects and starts consuming in the background. */
  static spawn(options: ReplicaOptions): LedgerReplica {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const name of ["RABBIT_INBOX_FAULT", "LEDGER_BATCH_SIZE", "LEDGER_PREFETCH", "LEDGER_QUEUE_TYPE", "NODE_OPTIONS"]) delete env[name];
    Object.assign(env, {
      AMQP_URL: options.amqpUrl,
      DATABASE_URL: options.databaseUrl,
      LEDGER_QUEUE: options.queue,
      LEDGER_PARTITIONS: String(options.partitions),
      // Info: membership and failover lines, not one line per batch (that costs CPU the replicas need).
      RABBIT_INBOX_LOG_LEVEL: "info",
    });
    const startedAt = performance.now();
    const child = spawn(process.execPath, [LEDGER_MAIN], { env, stdio: ["ignore", "pipe", "pipe"] });
    return new LedgerReplica(child, options.label, startedAt);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** The partitions this replica says it holds, from its last `consuming` or `partitions rebalanced` line. */
  get held(): number[] | undefined {
    for (let i = this.logs.length - 1; i >= 0; i--) {
      const { record } = this.logs[i]!;
      if ((record.msg === "consuming" || record.msg === "partitions rebalanced") && Array.isArray(record.held)) return record.held as number[];
    }
    return undefined;
  }

  /** The broker node (`host:port`) of its last session, from the lines that name one. */
  get node(): string | undefined {
    for (let i = this.logs.length - 1; i >= 0; i--) {
      const { record } = this.logs[i]!;
      if ((record.msg === "consuming" || record.msg === "AMQP session restored" || record.msg === "partitions rebalanced") && typeof record.node === "string") return record.node;
    }
    return undefined;
  }

  /** Its outcome counts, from the `stopped` line a clean stop writes. */
  get stoppedCounts(): Record<string, number> | undefined {
    const line = this.logs.find((l) => l.record.msg === "stopped");
    if (!line) return undefined;
    const counts: Record<string, number> = {};
    for (const [key, value] of Object.entries(line.record)) if (typeof value === "number") counts[key] = value;
    return counts;
  }

  linesWith(msg: string, since = 0): ReplicaLogLine[] {
    return this.logs.filter((l) => l.record.msg === msg && l.at >= since);
  }

  /** Called after every log line and at exit. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  signal(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  /** SIGTERM (the service drains and exits 0), then SIGKILL if it is still there after `graceMs`. */
  async stop(graceMs = 30_000): Promise<ReplicaExit> {
    this.signal("SIGTERM");
    const timer = setTimeout(() => this.signal("SIGKILL"), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The last lines it wrote, for error messages. */
  tail(lines = 20): string {
    const all = [...this.logs.map((l) => JSON.stringify(l.record)), ...this.otherOutput];
    return `--- ${this.label} (pid ${this.pid ?? "?"}, ${this.exit ? `exited ${this.exit.signal ?? `code ${this.exit.code}`}` : "running"}), last lines:\n${all.slice(-lines).map((l) => (l.length > 300 ? `${l.slice(0, 300)}...` : l)).join("\n")}`;
  }

  private read(line: string): void {
    const at = performance.now();
    if (line.startsWith("{")) {
      try {
        const record = JSON.parse(line) as ReplicaLogLine["record"];
        if (typeof record.msg === "string") {
          this.logs.push({ at, record });
          this.notify();
          return;
        }
      } catch {
        // not a JSON log line
      }
    }
    this.otherOutput.push(line);
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }
}
