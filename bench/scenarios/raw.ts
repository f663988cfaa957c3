/**
 * The reference: the fastest plain amqplib consumer of the bench's queue, no database. A large
 * prefetch keeps the broker sending while the consumer works through what it has, and one
 * `ack(message, true)` every `ackEvery` deliveries settles them all at once (plus one for the
 * rest at the end). `raw-simple` is the usual hand-written consumer (prefetch 200, one ack per
 * delivery), kept as a labelled extra.
 */
import amqp from "amqplib";
import { AMQP_URL, LatencyRecorder } from "../harness.js";

export interface RawSettings { prefetch: number; ackEvery: number }

/** The defaults: the fastest of the sweep (`--scenario raw-sweep`) on the 2-core machine the document describes. */
export const RAW_DEFAULT: RawSettings = { prefetch: 1000, ackEvery: 250 };
export const RAW_SIMPLE: RawSettings = { prefetch: 200, ackEvery: 1 };

export function describeRaw(settings: RawSettings): string {
  return settings.ackEvery === 1
    ? `prefetch ${settings.prefetch}, one ack per delivery`
    : `prefetch ${settings.prefetch}, one multiple-ack per ${settings.ackEvery} deliveries`;
}

/** Consumes `n` messages; resolves once the last one is acked. Latency: delivery to the ack that covers it. */
export async function runRawConsumer(queue: string, n: number, settings: RawSettings): Promise<{ seconds: number; latency: LatencyRecorder }> {
  if (settings.ackEvery < 1 || settings.ackEvery > settings.prefetch) {
    throw new Error(`raw: ackEvery must be 1..prefetch (${settings.prefetch}), got ${settings.ackEvery}`);
  }
  const connection = await amqp.connect(AMQP_URL);
  const latency = new LatencyRecorder();
  try {
    const channel = await connection.createChannel();
    await channel.prefetch(settings.prefetch);
    const unacked: number[] = [];
    let received = 0;
    let started = 0;
    await new Promise<void>((resolve, reject) => {
      void channel.consume(queue, (message) => {
        if (!message) return reject(new Error("consumer cancelled"));
        const now = performance.now();
        if (received === 0) started = now;
        received++;
        unacked.push(now);
        if (unacked.length >= settings.ackEvery || received === n) {
          channel.ack(message, settings.ackEvery > 1);
          const acked = performance.now();
          for (const at of unacked) latency.record(acked - at);
          unacked.length = 0;
        }
        if (received === n) resolve();
      }, { noAck: false });
    });
    return { seconds: (performance.now() - started) / 1000, latency };
  } finally {
    await connection.close();
  }
}
