import { execFile } from "node:child_process";
import { promisify } from "node:util";
import amqp from "amqplib";
import { retryQueueName } from "../../src/amqp/topology.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";

const run = promisify(execFile);

export const amqpUrl = process.env.TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";

/** Publishes bodies (objects as JSON, strings/Buffers as is) with confirms, persistent. */
export async function publishAll(queue: string, bodies: ReadonlyArray<object | string | Buffer>, options: amqp.Options.Publish = {}): Promise<void> {
  const connection = await amqp.connect(amqpUrl);
  try {
    const channel = await connection.createConfirmChannel();
    for (const body of bodies) {
      const bytes = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
      channel.sendToQueue(queue, bytes, { persistent: true, contentType: "application/json", ...options });
    }
    await channel.waitForConfirms();
  } finally {
    await connection.close();
  }
}

/** Runs `work` with a channel on a fresh connection; channel errors are swallowed (probes). */
export async function withChannel<T>(work: (channel: amqp.Channel) => Promise<T>): Promise<T> {
  const connection = await amqp.connect(amqpUrl);
  try {
    const channel = await connection.createChannel();
    channel.on("error", () => undefined);
    return await work(channel);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

export async function deleteQueues(...names: string[]): Promise<void> {
  for (const name of names) {
    await withChannel((ch) => ch.deleteQueue(name)).catch(() => undefined);
  }
}

export async function deleteExchanges(...names: string[]): Promise<void> {
  for (const name of names) {
    await withChannel((ch) => ch.deleteExchange(name)).catch(() => undefined);
  }
}

/** Deletes what an InboxConsumer on `queue` declares: the queue, its quarantine queue and its three delayed-retry queues. */
export async function deleteConsumerQueues(queue: string): Promise<void> {
  await deleteQueues(queue, `${queue}.quarantine`, ...[1, 2, 3].map((n) => retryQueueName(queue, n)));
}

/** Messages ready in a queue (unacked ones are not counted). */
export async function messagesReady(queue: string): Promise<number> {
  return withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount);
}

/** Takes every ready message off a queue (acked), for inspection. */
export async function drainQueue(queue: string): Promise<amqp.GetMessage[]> {
  return withChannel(async (ch) => {
    const out: amqp.GetMessage[] = [];
    for (;;) {
      const m = await ch.get(queue, { noAck: true });
      if (!m) return out;
      out.push(m);
    }
  });
}

/** Closes, from the broker side, every connection whose client-provided name is `name`. */
export async function closeConnectionsNamed(name: string): Promise<number> {
  const { stdout } = await run("rabbitmqctl", ["-q", "list_connections", "pid", "client_properties", "--no-table-headers"]);
  let closed = 0;
  for (const line of stdout.split("\n")) {
    const [pid, props] = line.split("\t");
    if (!pid || !props?.includes(`{"connection_name",${JSON.stringify(name)}}`)) continue;
    await run("rabbitmqctl", ["-q", "close_connection", pid, "closed by test"]);
    closed++;
  }
  return closed;
}

/** Polls `predicate` every 50 ms until it holds; fails after `timeoutMs`, naming `what`. */
export async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  await waitUntil(async () => ((await predicate()) ? true : undefined), what, { timeoutMs, intervalMs: 50 });
}
