/**
 * The ledger scenario's downstream service, in a process of its own so that the ledger's event
 * loop and CPU figures are the service's alone: a plain amqplib consumer of the queue the
 * scenario bound to the `balance.changed` exchange (prefetch 1000, one multiple-ack per 250
 * deliveries). It records when each event's first `balance.changed` arrived (epoch ms, indexed
 * by the event's index), tells its parent once every one of the `n` events has arrived, writes
 * the times to a file and exits (before the parent reads /proc again: its CPU is not counted as
 * another process's, it reports its own).
 *   node downstream-consumer.js <amqpUrl> <queue> <n> <timesFile>
 */
import { writeFileSync } from "node:fs";
import amqp from "amqplib";

export interface DownstreamDone {
  receivedAllAt: number;
  duplicates: number;
  /** This process's CPU time (user + system) while consuming, in microseconds. */
  cpuUs: number;
}

async function main(): Promise<void> {
  const [url, queue, count, timesFile] = process.argv.slice(2);
  const n = Number(count);
  const receivedAt = new Float64Array(n).fill(-1);
  const connection = await amqp.connect(url!);
  const channel = await connection.createChannel();
  await channel.prefetch(1000);
  const cpuAtStart = process.cpuUsage();
  let unique = 0;
  let duplicates = 0;
  let unacked = 0;
  await new Promise<void>((resolve, reject) => {
    void channel.consume(queue!, (message) => {
      if (!message) return reject(new Error("downstream consumer cancelled"));
      const now = performance.timeOrigin + performance.now();
      const { caused_by: causedBy } = JSON.parse(message.content.toString()) as { caused_by: string };
      const i = Number(causedBy.slice(causedBy.lastIndexOf("-") + 1));
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
        const done: DownstreamDone = { receivedAllAt: now, duplicates, cpuUs: cpu.user + cpu.system };
        writeFileSync(timesFile!, Buffer.from(receivedAt.buffer));
        process.send!(done);
        resolve();
      }
    }, { noAck: false }).catch(reject);
  });
  await connection.close();
}

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
