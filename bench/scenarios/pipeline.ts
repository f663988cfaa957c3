/**
 * The `pipeline` scenario, the reference for the ledger end to end: the broker work the ledger
 * needs and nothing else, written as well as a user could with amqplib. It consumes the bench
 * queue (prefetch 1000), publishes a persistent copy of each event (a `balance.changed`, see
 * balance-changed-copy.ts) with publisher confirms to the durable fanout exchange the downstream
 * queue is bound to, and multiple-acks the originals once their copies are confirmed: up to the
 * newest delivery whose copy and every earlier copy are confirmed (confirm-window.ts), never
 * before. Confirms are taken as the broker sends them, through a callback per copy (amqplib's
 * waitForConfirms wraps every outstanding copy in a promise of its own at each call, and batches
 * of it measured slower): a sliding window of copies in flight up to the prefetch, one ack per
 * burst of confirms. The downstream consumer (its own process) takes every
 * copy. Timed from the first delivery to the last copy received downstream.
 */
import amqp from "amqplib";
import type { ConsumeMessage } from "amqplib";
import { adjustment } from "../databases/bench-database.js";
import { AMQP_URL, LatencyRecorder, eventIndex } from "../harness.js";
import { BalanceChangedCopies } from "./balance-changed-copy.js";
import { ConfirmWindow } from "./confirm-window.js";
import { Downstream } from "./downstream.js";

export const PIPELINE_PREFETCH = 1000;
/** How long the downstream consumer may still take once every original was acked. */
const DOWNSTREAM_GRACE_MS = 120_000;

/** What a pipeline scenario measured. */
export interface PipelineMeasurement {
  /** First delivery to the last copy received downstream. */
  seconds: number;
  /** Delivery of each event to its copy received downstream. */
  latency: LatencyRecorder;
  /** First delivery to the ack of the last original. */
  ackedSeconds: number;
  /** Copies received more than once (none is published twice: any is a fault). */
  duplicates: number;
  downstreamCpuUsPerMsg: number;
}

/** When the consuming side saw its first delivery and sent its last ack (performance.now()). */
export interface ConsumedSpan { startedAt: number; ackedAt: number }

/**
 * Runs `consume` (which publishes a copy of each of the `n` events to `exchange`, records when
 * each was delivered by event index, and settles every original) against the downstream
 * consumer, and measures both ends. `measured` is called once every copy arrived.
 */
export async function measureThroughDownstream(
  queue: string, n: number, measured: () => void,
  consume: (exchange: string, deliveredAt: Float64Array) => Promise<ConsumedSpan>,
): Promise<PipelineMeasurement> {
  const downstream = await Downstream.start(queue, n);
  try {
    const deliveredAt = new Float64Array(n).fill(-1);
    const { startedAt, ackedAt } = await consume(downstream.exchange, deliveredAt);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the downstream consumer did not receive every copy within ${DOWNSTREAM_GRACE_MS} ms of the last ack`)), DOWNSTREAM_GRACE_MS);
    });
    const done = await Promise.race([downstream.done, late]).finally(() => clearTimeout(timer));
    await downstream.exited;
    measured();
    if (done.duplicates > 0) throw new Error(`${done.duplicates} copies received twice downstream, though each was published once`);
    const receivedAt = downstream.receivedAt();
    const latency = new LatencyRecorder();
    for (let i = 0; i < n; i++) latency.record(receivedAt[i]! - performance.timeOrigin - deliveredAt[i]!);
    return {
      seconds: (done.receivedAllAt - performance.timeOrigin - startedAt) / 1000, latency,
      ackedSeconds: (ackedAt - startedAt) / 1000, duplicates: done.duplicates, downstreamCpuUsPerMsg: Math.round(done.cpuUs / n),
    };
  } finally {
    await downstream.close();
  }
}

export function runPipeline(queue: string, n: number, measured: () => void): Promise<PipelineMeasurement> {
  return measureThroughDownstream(queue, n, measured, (exchange, deliveredAt) => copyAndAck(queue, n, exchange, deliveredAt));
}

async function copyAndAck(queue: string, n: number, exchange: string, deliveredAt: Float64Array): Promise<ConsumedSpan> {
  const connection = await amqp.connect(AMQP_URL);
  try {
    const consumer = await connection.createChannel();
    await consumer.prefetch(PIPELINE_PREFETCH);
    const publisher = await connection.createConfirmChannel();
    const copies = new BalanceChangedCopies();
    return await new Promise<ConsumedSpan>((resolve, reject) => {
      let failed = false;
      const fail = (error: unknown) => { failed = true; reject(error instanceof Error ? error : new Error(String(error))); };
      // A returned copy is confirmed all the same: its original must then not be acked.
      publisher.on("return", () => fail(new Error(`a copy was returned unroutable by ${exchange}`)));
      let received = 0;
      let startedAt = 0;
      const window = new ConfirmWindow<ConsumeMessage>(PIPELINE_PREFETCH);
      let ackScheduled = false;
      const ackConfirmed = () => {
        ackScheduled = false;
        if (failed) return;
        const newest = window.ackable();
        if (newest) consumer.ack(newest, true);
        if (received === n && window.unconfirmed === 0) resolve({ startedAt, ackedAt: performance.now() });
      };
      void consumer.consume(queue, (message) => {
        if (!message) return fail(new Error("consumer cancelled"));
        const now = performance.now();
        if (received === 0) startedAt = now;
        received++;
        const event = adjustment(message.content);
        deliveredAt[eventIndex(event.eventId)] = now;
        const { body, options } = copies.copyOf(event);
        let seq: number;
        try {
          seq = window.add(message);
        } catch (error) {
          return fail(error);
        }
        publisher.publish(exchange, "", body, options, (error) => {
          if (error) return fail(error);
          try {
            window.confirm(seq);
          } catch (mismatch) {
            return fail(mismatch);
          }
          // Confirms arrive in bursts (often one frame confirms many): one ack after the burst.
          if (!ackScheduled) {
            ackScheduled = true;
            queueMicrotask(ackConfirmed);
          }
        });
      }, { noAck: false }).catch(fail);
    });
  } finally {
    await connection.close();
  }
}
