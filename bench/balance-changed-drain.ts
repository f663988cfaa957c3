/**
 * Takes the ledger's `balance.changed` messages away during the scale-out benchmark: the outbox
 * relay's publishes need a bound queue to be routable (unroutable ones are retried, and would
 * keep the relay busy), and that queue must not grow without end. A quorum queue, so that it
 * outlives the node kills; the consumer can move to another node before its node is killed.
 */
import amqp from "amqplib";
import type { ChannelModel } from "amqplib";

export class BalanceChangedDrain {
  received = 0;
  private connection: ChannelModel | undefined;

  private constructor(readonly queue: string, private readonly exchange: string) {}

  /** Declares `<ledgerQueue>.bench-balance-changed`, binds it to the ledger's exchange and consumes it. */
  static async start(url: string, ledgerQueue: string): Promise<BalanceChangedDrain> {
    const drain = new BalanceChangedDrain(`${ledgerQueue}.bench-balance-changed`, `${ledgerQueue}.balance-changed`);
    await drain.open(url, true);
    return drain;
  }

  async moveTo(url: string): Promise<void> {
    const old = this.connection;
    this.connection = undefined;
    await old?.close().catch(() => undefined);
    await this.open(url, false);
  }

  /** Closes the connection, and deletes the queue when `deleteQueue` (through a fresh channel). */
  async stop(deleteQueue: boolean): Promise<void> {
    const connection = this.connection;
    if (!connection) return;
    if (deleteQueue) {
      const channel = await connection.createChannel();
      channel.on("error", () => undefined);
      await channel.deleteQueue(this.queue).catch(() => undefined);
    }
    this.connection = undefined;
    await connection.close().catch(() => undefined);
  }

  private async open(url: string, declare: boolean): Promise<void> {
    const connection = await amqp.connect(url, { clientProperties: { connection_name: "rabbit-inbox scale-out bench balance.changed drain" } });
    // A lost drain only lets balance.changed wait in its (quorum) queue: nothing to stop for.
    connection.on("error", () => undefined);
    const channel = await connection.createChannel();
    channel.on("error", () => undefined);
    if (declare) {
      await channel.assertExchange(this.exchange, "fanout", { durable: true });
      await channel.assertQueue(this.queue, { durable: true, arguments: { "x-queue-type": "quorum" } });
      await channel.bindQueue(this.queue, this.exchange, "");
    }
    await channel.prefetch(2000);
    await channel.consume(this.queue, (message) => {
      if (!message) return;
      this.received++;
      channel.ack(message);
    }, { noAck: false });
    this.connection = connection;
  }
}
