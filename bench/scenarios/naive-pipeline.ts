/**
 * The `naive-pipeline` scenario: the dual write people write by hand. Per event, as the `naive`
 * consumer does (prefetch 200, the database's pool of 10), one autocommit UPDATE of the account;
 * then it publishes the copy (a `balance.changed`, see balance-changed-copy.ts) with a publisher
 * confirm and waits for it, then acks. No dedup, no outbox: a crash between the UPDATE and the
 * publish loses the copy, and a redelivery applies the event twice. The downstream consumer
 * (its own process) takes every copy; timed from the first delivery to the last copy received
 * downstream.
 */
import type { ConfirmChannel } from "amqplib";
import { type BenchDatabase, adjustment } from "../databases/bench-database.js";
import { eventIndex, runPlainConsumer } from "../harness.js";
import { BalanceChangedCopies } from "./balance-changed-copy.js";
import { type PipelineMeasurement, measureThroughDownstream } from "./pipeline.js";

export function runNaivePipeline(db: BenchDatabase, queue: string, n: number, prefetch: number, measured: () => void): Promise<PipelineMeasurement> {
  return measureThroughDownstream(queue, n, measured, async (exchange, deliveredAt) => {
    const copies = new BalanceChangedCopies();
    let publisher!: ConfirmChannel;
    let returned: Error | undefined;
    const span = await runPlainConsumer(queue, n, prefetch, async (channel, message) => {
      const delivered = performance.now();
      const event = adjustment(message.content);
      deliveredAt[eventIndex(event.eventId)] = delivered;
      await db.naive(event);
      const { body, options } = copies.copyOf(event);
      await new Promise<void>((resolve, reject) => {
        publisher.publish(exchange, "", body, options, (error) => { if (error) reject(error instanceof Error ? error : new Error(String(error))); else resolve(); });
      });
      // A returned copy is confirmed all the same: its original must then not be acked.
      if (returned) throw returned;
      channel.ack(message);
    }, async (connection) => {
      publisher = await connection.createConfirmChannel();
      publisher.on("return", () => { returned ??= new Error(`a copy was returned unroutable by ${exchange}`); });
    });
    return { startedAt: span.startedAt, ackedAt: span.settledAt };
  });
}
