import type { ChannelModel } from "amqplib";
import { type BrokerUrls, BrokerConnector } from "../amqp/broker-connection.js";
import { ConfirmedPublisher } from "../amqp/confirmed-publisher.js";
import type { ConfirmedPublish, ReplayMessage } from "./replay.js";

/**
 * A broker connection for replays: a confirm channel, `mandatory` publishes (an unroutable
 * message is a failure, not a silent drop) and a confirm timeout.
 */
export class AmqpReplayPublisher {
  private constructor(private readonly connection: ChannelModel, private readonly publisher: ConfirmedPublisher) {}

  /** `url`: one node, or the nodes of a cluster (an array or a comma-separated list): the first that answers. */
  static async connect(url: BrokerUrls, options: { confirmTimeoutMs?: number; connectionName?: string } = {}): Promise<AmqpReplayPublisher> {
    const connector = new BrokerConnector(url, { connectionName: options.connectionName ?? `rabbit-inbox replay ${process.pid}` });
    const { connection } = await connector.connect();
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
