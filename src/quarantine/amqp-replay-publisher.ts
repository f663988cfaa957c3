import amqp from "amqplib";
import type { ChannelModel } from "amqplib";
import { ConfirmedPublisher } from "../amqp/confirmed-publisher.js";
import type { ConfirmedPublish, ReplayMessage } from "./replay.js";

/**
 * A broker connection for replays: a confirm channel, `mandatory` publishes (an unroutable
 * message is a failure, not a silent drop) and a confirm timeout.
 */
export class AmqpReplayPublisher {
  private constructor(private readonly connection: ChannelModel, private readonly publisher: ConfirmedPublisher) {}

  static async connect(url: string, options: { confirmTimeoutMs?: number; connectionName?: string } = {}): Promise<AmqpReplayPublisher> {
    const connection = await amqp.connect(url, { timeout: 10_000, clientProperties: { connection_name: options.connectionName ?? `rabbit-inbox replay ${process.pid}` } });
    connection.on("error", () => undefined);
    try {
      const channel = await connection.createConfirmChannel();
      channel.on("error", () => undefined);
      return new AmqpReplayPublisher(connection, new ConfirmedPublisher(channel, options.confirmTimeoutMs ?? 10_000));
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  readonly publish: ConfirmedPublish = (message: ReplayMessage) =>
    this.publisher.publish("", message.queue, message.body, message.options);

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined);
  }
}
