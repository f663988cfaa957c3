/**
 * The receiving end of the scenarios that publish a `balance.changed` per event (ledger,
 * pipeline, naive-pipeline): the durable fanout exchange `<queue>.balance-changed`, a durable
 * queue bound to it, and the plain consumer of that queue in a process of its own
 * (downstream-consumer.ts), so that its CPU is not the measured process's.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import amqp from "amqplib";
import { AMQP_URL } from "../harness.js";
import { type DownstreamDone, PUBLISH, READY } from "./traffic-protocol.js";

/** Events published during the run at a fixed rate (by the traffic process) instead of beforehand. */
export interface TrafficPacing { rate: number; runTag: string; accounts: number }

export class Downstream {
  private last: DownstreamDone | undefined;
  /**
   * Settles once the consumer has the first copy of each of the `n` events: resolves with its
   * report, rejects when it exits without one.
   */
  readonly done: Promise<DownstreamDone>;
  /** Resolves when the consumer's process has exited (after `done`, it reports its CPU first). */
  readonly exited: Promise<void>;
  /** Resolves once the consumer consumes; rejects when it exits before. */
  private readonly consuming: Promise<void>;

  private constructor(
    readonly exchange: string,
    private readonly queue: string,
    private readonly connection: amqp.ChannelModel,
    private readonly setup: amqp.Channel,
    private readonly timesDir: string,
    private readonly child: ChildProcess,
  ) {
    this.consuming = new Promise<void>((resolve, reject) => {
      child.on("message", (message: unknown) => { if (message === READY) resolve(); });
      child.once("exit", (code) => reject(new Error(`downstream consumer exited with code ${code} before it consumed`)));
    });
    this.done = new Promise<DownstreamDone>((resolve, reject) => {
      child.on("message", (message: unknown) => {
        if (message === READY) return;
        this.last = message as DownstreamDone;
        resolve(this.last);
      });
      child.once("exit", (code) => {
        if (code !== 0 || !this.last) reject(new Error(`downstream consumer exited with code ${code} before it received every balance.changed`));
      });
    });
    // Whoever awaits them sees the failure; this keeps them from being unhandled rejections meanwhile.
    this.consuming.catch(() => undefined);
    this.done.catch(() => undefined);
    this.exited = new Promise<void>((resolve) => { child.once("exit", () => resolve()); });
  }

  /** Declares the exchange and the queue, and starts the consumer (and, paced, the producer) process. */
  static async start(eventsQueue: string, n: number, pacing?: TrafficPacing): Promise<Downstream> {
    const exchange = `${eventsQueue}.balance-changed`;
    const queue = `${eventsQueue}.downstream`;
    const connection = await amqp.connect(AMQP_URL);
    const setup = await connection.createChannel();
    await setup.assertExchange(exchange, "fanout", { durable: true });
    await setup.assertQueue(queue, { durable: true });
    await setup.bindQueue(queue, exchange, "");
    const timesDir = mkdtempSync(join(tmpdir(), "rabbit-inbox-bench-downstream-"));
    const args = [AMQP_URL, queue, String(n), join(timesDir, "received-at.f64"), ...(pacing ? [eventsQueue, String(pacing.rate), pacing.runTag, String(pacing.accounts)] : [])];
    const child = fork(fileURLToPath(new URL("./downstream-consumer.js", import.meta.url)), args, { stdio: "inherit" });
    const downstream = new Downstream(exchange, queue, connection, setup, timesDir, child);
    try {
      await downstream.consuming;
    } catch (error) {
      await downstream.close();
      throw error;
    }
    return downstream;
  }

  /** Paced: tells the traffic process to start publishing the events. */
  startPublishing(): void {
    this.child.send(PUBLISH);
  }

  /** When each event's first copy arrived (epoch ms, by event index); readable once `done` resolved. */
  receivedAt(): Float64Array {
    return readTimes(join(this.timesDir, "received-at.f64"));
  }

  /** Paced: when each event was published (epoch ms, by event index). */
  publishedAt(): Float64Array {
    return readTimes(join(this.timesDir, "received-at.f64.published"));
  }

  async close(): Promise<void> {
    if (this.child.exitCode === null) this.child.kill();
    rmSync(this.timesDir, { recursive: true, force: true });
    await this.setup.deleteQueue(this.queue).catch(() => undefined);
    await this.setup.deleteExchange(this.exchange).catch(() => undefined);
    await this.connection.close().catch(() => undefined);
  }
}

function readTimes(file: string): Float64Array {
  const bytes = readFileSync(file);
  return new Float64Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}
