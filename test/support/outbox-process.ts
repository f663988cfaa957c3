import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { nodeEntryArgs } from "../../examples/ledger/driver/node-entry.js";
import type { RelayFaultPoint } from "../../src/outbox/outbox-relay-options.js";
import { amqpUrl } from "./broker.js";
import { eventually } from "./outbox.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** test/support/outbox-relay-process.ts as a child process: its output captured, killable. */
export class RelayProcess {
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exitedNow = false;

  private constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on("line", (line) => this.stdout.push(line));
    createInterface({ input: child.stderr! }).on("line", (line) => this.stderr.push(line));
    this.exited = new Promise((resolve) => child.once("close", (code, signal) => { this.exitedNow = true; resolve({ code, signal }); }));
  }

  static async start(databaseUrl: string, options: {
    pauseAfterConfirm?: boolean; pauseAt?: RelayFaultPoint; leaseMs?: number; amqpUrl?: string; sentRetentionMs?: number;
    /** Rows this process commits itself once started (see outbox-relay-process.ts). */
    write?: { exchange: string; transactions: number; rowsPerTransaction: number; keys: number };
  } = {}): Promise<RelayProcess> {
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: databaseUrl, AMQP_URL: options.amqpUrl ?? amqpUrl, RABBIT_INBOX_LOG_LEVEL: "info" };
    delete env.NODE_OPTIONS;
    if (options.pauseAfterConfirm) env.RELAY_PAUSE_AFTER_CONFIRM = "1";
    if (options.pauseAt) env.RELAY_PAUSE_AT = options.pauseAt;
    if (options.write) {
      const w = options.write;
      env.RELAY_WRITE = `${w.exchange}:${w.transactions}:${w.rowsPerTransaction}:${w.keys}`;
    }
    if (options.leaseMs) env.RELAY_LEASE_MS = String(options.leaseMs);
    if (options.sentRetentionMs !== undefined) env.RELAY_SENT_RETENTION_MS = String(options.sentRetentionMs);
    const child = spawn(process.execPath, nodeEntryArgs("test/support/outbox-relay-process.ts"), { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    const p = new RelayProcess(child);
    await p.waitForLine(/^relay: started$/, 30_000);
    return p;
  }

  async waitForLine(pattern: RegExp, timeoutMs = 20_000): Promise<RegExpExecArray> {
    return eventually(() => {
      for (const line of this.stdout) {
        const match = pattern.exec(line);
        if (match) return match;
      }
      if (this.exitedNow) throw new Error(`relay process exited while waiting for ${String(pattern)}\n${this.output()}`);
      return undefined;
    }, `relay process output ${String(pattern)}\n${this.output()}`, timeoutMs);
  }

  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.exitedNow) this.child.kill(signal);
    return this.exited;
  }

  output(): string {
    return [...this.stdout, ...this.stderr.slice(-20)].join("\n");
  }
}
