/**
 * The ledger scenario's traffic, in a process of its own so that the ledger's event loop and CPU
 * figures are the service's alone:
 * - downstream: a plain amqplib consumer of the queue the scenario bound to the `balance.changed`
 *   exchange (prefetch 1000, one multiple-ack per 250 deliveries). It tells its parent once it
 *   consumes (the measured consumer starts after that), and records when each event's
 *   first `balance.changed` arrived (epoch ms, by the event's index);
 * - with a rate (`--ledger-rate`), also the producer: once the parent says `publish`, it publishes
 *   the `n` events to the ledger's queue at that rate (persistent, confirmed in windows) and
 *   records when each was published.
 * Once every one of the `n` events has its `balance.changed`, it writes the times to files, tells
 * its parent, and exits (before the parent reads /proc again: it reports its own CPU).
 *   node downstream-consumer.js <amqpUrl> <downstreamQueue> <n> <timesFile> [<eventsQueue> <rate> <runTag> <accounts>]
 */
import { writeFileSync } from "node:fs";
import amqp from "amqplib";
import { eventBody, eventIndex } from "../harness.js";
import { type DownstreamDone, PUBLISH, READY } from "./traffic-protocol.js";

/** Publishes events 0..n-1 at `rate` per second, `publishedAt[i]` set as each goes out. */
async function produce(connection: amqp.ChannelModel, queue: string, n: number, rate: number, runTag: string, accounts: number, publishedAt: Float64Array): Promise<void> {
  const channel = await connection.createConfirmChannel();
  const started = performance.now();
  let sent = 0;
  let unconfirmed = 0;
  while (sent < n) {
    // As many as the rate allows by now: a late tick catches up instead of lowering the rate.
    const due = Math.min(n, Math.floor(((performance.now() - started) / 1000) * rate) + 1);
    for (; sent < due; sent++, unconfirmed++) {
      publishedAt[sent] = performance.timeOrigin + performance.now();
      channel.sendToQueue(queue, eventBody(sent, accounts, runTag), { persistent: true, contentType: "application/json" });
    }
    if (unconfirmed >= 1000) {
      await channel.waitForConfirms();
      unconfirmed = 0;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await channel.waitForConfirms();
}

async function main(): Promise<void> {
  const [url, queue, count, timesFile, eventsQueue, rateText, runTag, accountsText] = process.argv.slice(2);
  const n = Number(count);
  const rate = Number(rateText ?? 0);
  const receivedAt = new Float64Array(n).fill(-1);
  const publishedAt = new Float64Array(rate > 0 ? n : 0).fill(-1);
  const connection = await amqp.connect(url!);
  const channel = await connection.createChannel();
  await channel.prefetch(1000);
  const cpuAtStart = process.cpuUsage();
  if (rate > 0) {
    process.once("message", (message) => {
      if (message !== PUBLISH) return;
      produce(connection, eventsQueue!, n, rate, runTag!, Number(accountsText), publishedAt).catch((error: unknown) => {
        console.error(error);
        process.exit(1);
      });
    });
  }
  let unique = 0;
  let duplicates = 0;
  let unacked = 0;
  await new Promise<void>((resolve, reject) => {
    channel.consume(queue!, (message) => {
      if (!message) return reject(new Error("downstream consumer cancelled"));
      const now = performance.timeOrigin + performance.now();
      const { caused_by: causedBy } = JSON.parse(message.content.toString()) as { caused_by: string };
      const i = eventIndex(causedBy);
      if (receivedAt[i]! >= 0) duplicates++;
      else {
        receivedAt[i] = now;
        unique++;
      }
      if (++unacked >= 250 || unique === n) {
        channel.ack(message, true);
        unacked = 0;
      }
      if (unique === n) {
        const cpu = process.cpuUsage(cpuAtStart);
        writeFileSync(timesFile!, Buffer.from(receivedAt.buffer));
        if (rate > 0) writeFileSync(`${timesFile!}.published`, Buffer.from(publishedAt.buffer));
        const publishedPerSec = rate > 0 ? Math.round((n - 1) / ((publishedAt[n - 1]! - publishedAt[0]!) / 1000)) : undefined;
        const done: DownstreamDone = { receivedAllAt: now, duplicates, cpuUs: cpu.user + cpu.system, ...(publishedPerSec !== undefined ? { publishedPerSec } : {}) };
        process.send!(done);
        resolve();
      }
    }, { noAck: false }).then(() => { process.send!(READY); }, reject);
  });
  await connection.close();
}

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
