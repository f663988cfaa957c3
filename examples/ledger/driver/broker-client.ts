import { once } from "node:events";
import amqp from "amqplib";
import type { Channel, ChannelModel, ConfirmChannel, GetMessage } from "amqplib";
import { amqpUrlFromEnv } from "./ledger-environment.js";
import { type LedgerMessage, accountRoutingKey } from "./ledger-messages.js";
import { type WatchedProcess, waitUntil, withTimeout } from "./wait-until.js";

export interface QueueState {
  messageCount: number;
  consumerCount: number;
}

/** A test/demo client of the broker: confirmed publishes, queue depth, quarantine reads, cleanup. */
export class BrokerClient {
  private constructor(private readonly connection: ChannelModel, private readonly channel: ConfirmChannel) {}

  /** Connects; rejects with the connection error (ECONNREFUSED, ...) within `timeoutMs`. */
  static async connect(url: string = amqpUrlFromEnv(), options: { timeoutMs?: number } = {}): Promise<BrokerClient> {
    const connection = await amqp.connect(url, { timeout: options.timeoutMs ?? 5000, clientProperties: { connection_name: "rabbit-inbox ledger harness" } });
    connection.on("error", () => undefined);
    try {
      const channel = await connection.createConfirmChannel();
      channel.on("error", () => undefined);
      return new BrokerClient(connection, channel);
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  /** Declares the queue as the ledger does (durable, classic), so publishing may come first. */
  async declare(queue: string): Promise<void> {
    await this.channel.assertQueue(queue, { durable: true });
  }

  /**
   * Publishes persistent messages to `queue` through the default exchange and waits for the
   * broker's confirms. Objects go as JSON; strings and Buffers go as they are (malformed input).
   */
  async publish(queue: string, messages: ReadonlyArray<LedgerMessage | Record<string, unknown> | string | Buffer>): Promise<void> {
    for (const m of messages) {
      const body = Buffer.isBuffer(m) ? m : Buffer.from(typeof m === "string" ? m : JSON.stringify(m), "utf8");
      const ok = this.channel.publish("", queue, body, { persistent: true, contentType: "application/json" });
      if (!ok) await once(this.channel, "drain");
    }
    await withTimeout(this.channel.waitForConfirms(), 30_000, `publisher confirms for ${messages.length} messages`);
  }

  /**
   * Publishes persistent JSON messages to `exchange` (a partitioned ledger's consistent-hash
   * exchange) with the routing key `<tenant>/<account_id>`, and waits for the confirms.
   */
  async publishRouted(exchange: string, messages: readonly LedgerMessage[]): Promise<void> {
    for (const m of messages) {
      const ok = this.channel.publish(exchange, accountRoutingKey(m), Buffer.from(JSON.stringify(m), "utf8"), { persistent: true, contentType: "application/json" });
      if (!ok) await once(this.channel, "drain");
    }
    await withTimeout(this.channel.waitForConfirms(), 30_000, `publisher confirms for ${messages.length} messages`);
  }

  /**
   * Ready messages and consumers of a queue (passive declare on a throwaway channel: a missing
   * queue closes the channel it is checked on). Note: messageCount excludes deliveries a
   * consumer holds unacked.
   */
  async queueState(queue: string): Promise<QueueState> {
    const probe = await this.connection.createChannel();
    probe.on("error", () => undefined);
    try {
      const { messageCount, consumerCount } = await probe.checkQueue(queue);
      return { messageCount, consumerCount };
    } finally {
      await probe.close().catch(() => undefined);
    }
  }

  /** Waits until no message of `queue` is ready (some may still be unacked by a consumer). */
  async waitForNoReady(queue: string, options: { timeoutMs?: number; watch?: readonly WatchedProcess[] } = {}): Promise<void> {
    await waitUntil(async () => ((await this.queueState(queue)).messageCount === 0 ? true : undefined), `queue ${queue} to have no ready messages`, options);
  }

  /**
   * Messages left in `queue` once nothing consumes it. With no consumer, the broker has put every
   * unacked delivery back (it does so in the same step that removes the consumer), so
   * messageCount is then the whole depth: ready + unacknowledged.
   */
  async depthWithoutConsumers(queue: string, timeoutMs = 10_000): Promise<number> {
    const state = await waitUntil(async () => {
      const s = await this.queueState(queue);
      return s.consumerCount === 0 ? s : undefined;
    }, `queue ${queue} to lose its consumers`, { timeoutMs });
    return state.messageCount;
  }

  /** Takes every message currently in `queue` (auto-ack: the caller now owns them). */
  async takeAll(queue: string): Promise<GetMessage[]> {
    const taken: GetMessage[] = [];
    for (;;) {
      const m = await this.channel.get(queue, { noAck: true });
      if (m === false) return taken;
      taken.push(m);
    }
  }

  /** Deletes queues (a missing queue is fine). */
  async deleteQueues(...queues: string[]): Promise<void> {
    for (const queue of queues) await this.onThrowawayChannel((ch) => ch.deleteQueue(queue));
  }

  /** Deletes exchanges (a missing one is fine). */
  async deleteExchanges(...exchanges: string[]): Promise<void> {
    for (const exchange of exchanges) await this.onThrowawayChannel((ch) => ch.deleteExchange(exchange));
  }

  /**
   * Runs one command on a channel of its own and ignores its failure: a delete of something
   * already gone closes the channel it ran on (404), never this client's main channel.
   */
  private async onThrowawayChannel(command: (ch: Channel) => Promise<unknown>): Promise<void> {
    const ch = await this.connection.createChannel();
    ch.on("error", () => undefined);
    try {
      await command(ch);
    } catch {
      // already gone
    } finally {
      await ch.close().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined);
  }
}

/** A header of a message read from the quarantine queue, as text. */
export function headerText(message: GetMessage, name: string): string | undefined {
  const value: unknown = message.properties.headers?.[name];
  if (value === undefined || value === null) return undefined;
  if (Buffer.isBuffer(value)) return value.toString("utf8");
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean" ? String(value) : JSON.stringify(value);
}
