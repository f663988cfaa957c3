import amqp from "amqplib";
import type { Channel, ConsumeMessage } from "amqplib";
import { randomBytes } from "node:crypto";

export const AMQP_URL = process.env.AMQP_URL || "amqp://guest:guest@127.0.0.1:5672";

/** What one scenario run measured. */
export interface RunResult {
  scenario: string;
  database: string;
  messages: number;
  seconds: number;
  msgsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMb: number;
  /** Median RSS over the first and the last quarter of the run. */
  rssFirstQuarterMb: number;
  rssLastQuarterMb: number;
  /** CPU time of this (the consumer's) process per message, user + system, in microseconds. */
  nodeCpuUsPerMsg: number;
}

export function randomName(prefix: string): string {
  return `${prefix}.${randomBytes(4).toString("hex")}`;
}

/** A ledger event body: adjusts one of `accounts` accounts by a small integer delta. */
export function eventBody(i: number, accounts: number, runTag: string): Buffer {
  return Buffer.from(JSON.stringify({
    type: "balance.adjusted", tenant: "t1", event_id: `${runTag}-${i}`,
    account_id: `acc-${i % accounts}`, delta_cents: (i % 7) + 1,
  }));
}

/** Expected sum of all deltas for n events (see eventBody). */
export function expectedTotal(n: number): number {
  let total = 0;
  for (let i = 0; i < n; i++) total += (i % 7) + 1;
  return total;
}

/** Declares a fresh durable queue and publishes `n` persistent messages with confirms (untimed). */
export async function preparePublishedQueue(queue: string, n: number, accounts: number, runTag: string): Promise<void> {
  const connection = await amqp.connect(AMQP_URL);
  try {
    const channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: true });
    await channel.assertQueue(`${queue}.quarantine`, { durable: true });
    const window = 2000;
    for (let start = 0; start < n; start += window) {
      const end = Math.min(n, start + window);
      for (let i = start; i < end; i++) {
        const ok = channel.sendToQueue(queue, eventBody(i, accounts, runTag), { persistent: true, contentType: "application/json" });
        if (!ok) await new Promise((resolve) => channel.once("drain", resolve));
      }
      await channel.waitForConfirms();
    }
  } finally {
    await connection.close();
  }
}

export async function deleteQueues(queue: string): Promise<void> {
  const connection = await amqp.connect(AMQP_URL);
  try {
    const channel = await connection.createChannel();
    await channel.deleteQueue(queue);
    await channel.deleteQueue(`${queue}.quarantine`);
  } finally {
    await connection.close();
  }
}

/**
 * Samples RSS every 100 ms while a run is going on. Besides the peak, it reports the median RSS
 * of the first and the last quarter of the run: flat memory means those two stay close.
 */
export class RssSampler {
  private readonly samples: number[] = [process.memoryUsage().rss];
  private readonly timer = setInterval(() => { this.samples.push(process.memoryUsage().rss); }, 100);
  stop(): { peakMb: number; firstQuarterMb: number; lastQuarterMb: number } {
    clearInterval(this.timer);
    this.samples.push(process.memoryUsage().rss);
    const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
    const quarter = Math.max(1, Math.floor(this.samples.length / 4));
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    return {
      peakMb: mb(Math.max(...this.samples)),
      firstQuarterMb: mb(median(this.samples.slice(0, quarter))),
      lastQuarterMb: mb(median(this.samples.slice(-quarter))),
    };
  }
}

/** Latency of each message from delivery to settlement, recorded into a fixed array. */
export class LatencyRecorder {
  private readonly values: Float64Array;
  private count = 0;
  constructor(capacity: number) {
    this.values = new Float64Array(capacity);
  }
  record(ms: number): void {
    if (this.count < this.values.length) this.values[this.count++] = ms;
  }
  percentile(p: number): number {
    if (this.count === 0) return 0;
    const sorted = this.values.slice(0, this.count).sort();
    return Math.round(sorted[Math.min(this.count - 1, Math.floor((p / 100) * this.count))]! * 100) / 100;
  }
}

/**
 * Runs a hand-written consumer (the baselines) on its own connection: `onMessage` must settle
 * the message; resolves when `n` messages have been settled.
 */
export async function runPlainConsumer(
  queue: string, n: number, prefetch: number,
  onMessage: (channel: Channel, message: ConsumeMessage) => Promise<void>,
): Promise<{ seconds: number; latency: LatencyRecorder }> {
  const connection = await amqp.connect(AMQP_URL);
  const latency = new LatencyRecorder(n);
  try {
    const channel = await connection.createChannel();
    await channel.prefetch(prefetch);
    let done = 0;
    let started = 0;
    let failure: unknown;
    const finished = new Promise<void>((resolve, reject) => {
      void channel.consume(queue, (message) => {
        if (!message) return reject(new Error("consumer cancelled"));
        if (started === 0) started = performance.now();
        const t0 = performance.now();
        onMessage(channel, message).then(() => {
          latency.record(performance.now() - t0);
          if (++done === n) resolve();
        }, (error: unknown) => { failure = error; reject(error instanceof Error ? error : new Error(String(error))); });
      }, { noAck: false });
    });
    await finished;
    if (failure) throw failure as Error;
    return { seconds: (performance.now() - started) / 1000, latency };
  } finally {
    await connection.close();
  }
}
