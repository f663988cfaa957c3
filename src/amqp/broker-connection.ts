import amqp from "amqplib";
import type { ChannelModel } from "amqplib";
import { BrokerUnreachableError, InboxConfigError } from "../core/errors.js";
import { redactSecrets } from "../core/logger.js";
import { batchSocketWrites } from "./batched-socket-writes.js";
import { describeAmqpConnectError } from "./describe-connect-error.js";

/**
 * Where the broker is: one AMQP URL, several (the nodes of a cluster), or one string listing
 * several separated by commas (a comma inside a password must be written `%2C`).
 */
export type BrokerUrls = string | readonly string[];

/** The broker URLs as a list, each checked to be an `amqp:` or `amqps:` URL. */
export function brokerUrlList(urls: BrokerUrls): string[] {
  // `?? []`: JavaScript callers (and configuration read from the environment) may pass nothing.
  const list = (typeof urls === "string" ? urls.split(",") : [...(urls ?? [])]).map((u) => u.trim()).filter((u) => u.length > 0);
  if (list.length === 0) throw new InboxConfigError("url is required (the AMQP URL, or a list of the cluster's node URLs)");
  for (const url of list) {
    let protocol: string;
    try {
      protocol = new URL(url).protocol;
    } catch {
      throw new InboxConfigError(`broker URL ${JSON.stringify(redactSecrets(url))}: ${describeAmqpConnectError(new Error("Expected amqp: or amqps: as the protocol"), url)}`);
    }
    if (protocol !== "amqp:" && protocol !== "amqps:") {
      throw new InboxConfigError(`broker URL ${JSON.stringify(redactSecrets(url))} must start with amqp:// or amqps://`);
    }
  }
  return list;
}

/** A node as logs name it: host and port (and the vhost when not the default), never credentials. */
export function brokerNodeLabel(url: string): string {
  try {
    const u = new URL(url);
    const port = u.port || (u.protocol === "amqps:" ? "5671" : "5672");
    const vhost = decodeURIComponent(u.pathname.replace(/^\//, ""));
    return `${u.hostname}:${port}${vhost && vhost !== "/" ? ` vhost ${vhost}` : ""}`;
  } catch {
    return "<unparsable broker URL>";
  }
}

export interface BrokerConnectorOptions {
  /** Shown by `rabbitmqctl list_connections client_properties`. */
  connectionName: string;
  /** Socket connect timeout per node, in ms. Default 10 000. */
  connectTimeoutMs?: number;
}

/** An open connection and the node it reached. */
export interface BrokerLink {
  connection: ChannelModel;
  /** `host:port` of the node, for logs. */
  node: string;
}

/**
 * Connects to one node of a broker, trying each URL in turn. The first connection goes to the
 * first node that answers; a later one starts with the node AFTER the one last connected, so
 * a consumer that lost its node does not wait on that dead node first (and replicas that lost
 * the same node spread over the others). Every connection of the library (consumer, relay,
 * replay) goes through this, so failover behaves the same everywhere.
 */
export class BrokerConnector {
  readonly urls: readonly string[];
  private next = 0;
  private connectedOnce = false;

  constructor(urls: BrokerUrls, private readonly options: BrokerConnectorOptions) {
    this.urls = brokerUrlList(urls);
  }

  /** The nodes, as logs name them. */
  get nodes(): string[] {
    return this.urls.map(brokerNodeLabel);
  }

  /** One pass over the nodes; rejects with every node's failure when none answers. */
  async connect(): Promise<BrokerLink> {
    const failures: string[] = [];
    const reasons: string[] = [];
    const count = this.urls.length;
    const first = this.connectedOnce ? this.next : 0;
    for (let i = 0; i < count; i++) {
      const index = (first + i) % count;
      const url = this.urls[index]!;
      try {
        const connection = await amqp.connect(url, {
          timeout: this.options.connectTimeoutMs ?? 10_000,
          clientProperties: { connection_name: this.options.connectionName },
        });
        this.connectedOnce = true;
        this.next = (index + 1) % count;
        batchSocketWrites(connection);
        return { connection, node: brokerNodeLabel(url) };
      } catch (error) {
        const reason = redactSecrets(describeAmqpConnectError(error, url));
        reasons.push(reason);
        failures.push(`${brokerNodeLabel(url)}: ${reason}`);
      }
    }
    // Next time, start over from the node after the one tried first, so nodes take turns.
    this.next = (first + 1) % count;
    this.connectedOnce = true;
    throw new BrokerUnreachableError(
      // One node: its failure as it came (it names the host already, as amqplib's own did).
      count === 1 ? reasons[0]! : `cannot connect to any of the ${count} RabbitMQ nodes: ${failures.join("; ")}`,
      { failures: reasons },
    );
  }
}
