import { type BrokerUrls, BrokerConnector } from "../amqp/broker-connection.js";
import { ReconnectingSession } from "../amqp/reconnecting-session.js";
import { QuarantinePublishError } from "../core/errors.js";
import { reconnectPolicy } from "../core/retry-policy.js";
import type { ConfirmedPublish, ReplayMessage } from "./replay.js";

/**
 * A broker connection for replays: a confirm channel, `mandatory` publishes (an unroutable
 * message is a failure, not a silent drop) and a confirm timeout. A lost connection is
 * reopened in the background; a publish while there is none fails (the replay puts its entry
 * back to `held`).
 */
export class AmqpReplayPublisher {
  private constructor(private readonly broker: ReconnectingSession) {}

  /** `url`: one node, or the nodes of a cluster (an array or a comma-separated list): the first that answers. */
  static async connect(url: BrokerUrls, options: { confirmTimeoutMs?: number; connectionName?: string } = {}): Promise<AmqpReplayPublisher> {
    const connector = new BrokerConnector(url, { connectionName: options.connectionName ?? `rabbit-inbox replay ${process.pid}` });
    const broker = new ReconnectingSession({ connector, confirmTimeoutMs: options.confirmTimeoutMs ?? 10_000, backoff: reconnectPolicy({}) });
    await broker.open();
    return new AmqpReplayPublisher(broker);
  }

  readonly publish: ConfirmedPublish = (message: ReplayMessage) => {
    const session = this.broker.session;
    if (!session) return Promise.reject(new QuarantinePublishError("the connection to the broker is lost; reconnecting"));
    return session.publisher.publish("", message.queue, message.body, message.options);
  };

  async close(): Promise<void> {
    await this.broker.close();
  }
}
