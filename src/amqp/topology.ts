import type { Channel, ChannelModel } from "amqplib";
import { InboxConfigError, describeError } from "../core/errors.js";

/** The queues a consumer needs, and how each must be declared. */
export interface TopologySpec {
  queue: string;
  /** Declare arguments of the work queue, e.g. quorum settings. */
  queueArguments: Record<string, unknown> | undefined;
  quarantineQueue: string;
  /** Delay queues, in order: each dead-letters back to the work queue after its TTL. */
  retryQueues: ReadonlyArray<{ name: string; delayMs: number }>;
  /** true: declare everything (idempotent); false: only verify that it exists. */
  declare: boolean;
}

export function retryQueueName(queue: string, attempt: number): string {
  return `${queue}.retry.${attempt}`;
}

export function retryQueueArguments(queue: string, delayMs: number): Record<string, unknown> {
  return { "x-message-ttl": delayMs, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": queue };
}

/**
 * Arguments for a quorum work queue with at-least-once dead-lettering (RabbitMQ 3.10+):
 * a delivery limit so a poison message cannot loop, and a dead-letter exchange that must exist.
 */
export function quorumQueueArguments(options: { deliveryLimit?: number; deadLetterExchange?: string; deadLetterRoutingKey?: string } = {}): Record<string, unknown> {
  return {
    "x-queue-type": "quorum",
    ...(options.deliveryLimit !== undefined ? { "x-delivery-limit": options.deliveryLimit } : {}),
    ...(options.deadLetterExchange !== undefined
      ? {
          "x-dead-letter-exchange": options.deadLetterExchange,
          "x-dead-letter-strategy": "at-least-once",
          "x-overflow": "reject-publish",
          ...(options.deadLetterRoutingKey !== undefined ? { "x-dead-letter-routing-key": options.deadLetterRoutingKey } : {}),
        }
      : {}),
  };
}

/**
 * Declares (or, with `declare: false`, verifies) the work queue, the quarantine queue, the
 * delay queues and the work queue's dead-letter target. A queue declared elsewhere with other
 * arguments, or a dead-letter target that does not exist, fails here with the queue and the
 * argument named, instead of messages being dropped later.
 */
export async function prepareTopology(connection: ChannelModel, channel: Channel, spec: TopologySpec): Promise<void> {
  // The quarantine and delay queues of a quorum work queue are quorum queues too: a classic one
  // lives on one node, and while that node is down nothing can be quarantined or delayed (and a
  // consumer that declares its topology on reconnect cannot start at all).
  const companion = spec.queueArguments?.["x-queue-type"] === "quorum" ? { "x-queue-type": "quorum" } : undefined;
  const queues: Array<{ name: string; args: Record<string, unknown> | undefined; companion: boolean }> = [
    { name: spec.queue, args: spec.queueArguments, companion: false },
    { name: spec.quarantineQueue, args: companion, companion: true },
    ...spec.retryQueues.map((r) => ({ name: r.name, args: { ...companion, ...retryQueueArguments(spec.queue, r.delayMs) }, companion: true })),
  ];
  for (const q of queues) {
    if (spec.declare) {
      await withProbe(connection, async (probe) => {
        try {
          await probe.assertQueue(q.name, { durable: true, ...(q.args ? { arguments: q.args } : {}) });
        } catch (error) {
          // Declared classic by an earlier version: keep it rather than refuse to start.
          if (!(q.companion && companion && /inequivalent arg 'x-queue-type'/.test(describeError(error)))) throw error;
          const recheck = await connection.createChannel();
          recheck.on("error", () => undefined);
          await recheck.checkQueue(q.name).finally(() => recheck.close().catch(() => undefined));
        }
      }, (error) => new InboxConfigError(
        `queue ${JSON.stringify(q.name)} cannot be declared as configured (${describeError(error)}). ` +
        `Fix: make the consumer's queue arguments match the existing queue, or delete the queue so it can be declared again.`,
        { cause: error },
      ));
    } else {
      await withProbe(connection, (probe) => probe.checkQueue(q.name), (error) => new InboxConfigError(
        `queue ${JSON.stringify(q.name)} does not exist (declareTopology is false): declare it, or let the consumer declare it`, { cause: error },
      ));
    }
  }
  const dlx = spec.queueArguments?.["x-dead-letter-exchange"];
  if (typeof dlx === "string") {
    if (dlx === "") {
      const key = spec.queueArguments?.["x-dead-letter-routing-key"];
      if (typeof key === "string") {
        await withProbe(connection, (probe) => probe.checkQueue(key), (error) => new InboxConfigError(
          `queue ${JSON.stringify(spec.queue)} dead-letters to queue ${JSON.stringify(key)}, which does not exist: messages would be dropped silently`, { cause: error },
        ));
      }
    } else {
      await withProbe(connection, (probe) => probe.checkExchange(dlx), (error) => new InboxConfigError(
        `queue ${JSON.stringify(spec.queue)} has x-dead-letter-exchange ${JSON.stringify(dlx)}, which does not exist: dead-lettered messages would be dropped silently`, { cause: error },
      ));
    }
  }
  void channel;
}

/** A failed declare or check closes its channel: run each on a throwaway channel. */
async function withProbe(connection: ChannelModel, work: (probe: Channel) => Promise<unknown>, wrap: (error: unknown) => Error): Promise<void> {
  const probe = await connection.createChannel();
  probe.on("error", () => undefined);
  try {
    await work(probe);
  } catch (error) {
    throw wrap(error);
  }
  await probe.close().catch(() => undefined);
}

/** The partition queues of a partitioned work queue: `<queue>.p0` .. `<queue>.p<count-1>`. */
export function partitionQueueName(queue: string, partition: number): string {
  return `${queue}.p${partition}`;
}

/** The plugin behind the `x-consistent-hash` exchange type. */
export const CONSISTENT_HASH_PLUGIN = "rabbitmq_consistent_hash_exchange";

/**
 * Arguments of a partition queue: quorum by default (it survives a node's loss) and always
 * single active consumer, so that one replica at a time takes a partition's deliveries in order.
 */
export function partitionQueueArguments(queueArguments: Record<string, unknown> | undefined): Record<string, unknown> {
  return { "x-queue-type": "quorum", ...queueArguments, "x-single-active-consumer": true };
}

/**
 * Declares (or verifies) the `x-consistent-hash` exchange producers publish to. Run before the
 * partition queues are declared: a broker without the plugin is named as such (instead of a
 * bare "invalid exchange type") and no queue is left behind.
 */
export async function preparePartitionExchange(connection: ChannelModel, exchange: string, declare: boolean): Promise<void> {
  if (!declare) {
    await withProbe(connection, (probe) => probe.checkExchange(exchange), (error) => new InboxConfigError(
      `exchange ${JSON.stringify(exchange)} does not exist (declareTopology is false): declare it as x-consistent-hash, or let the consumer declare it`, { cause: error },
    ));
    return;
  }
  // An unknown exchange type is a connection-level error (503 COMMAND_INVALID): the reason comes
  // as the connection's error, not as the declare's rejection.
  let connectionError = "";
  const onError = (error: Error) => { connectionError = error.message; };
  connection.on("error", onError);
  try {
    await connection.createChannel().then(async (probe) => {
      probe.on("error", () => undefined);
      await probe.assertExchange(exchange, "x-consistent-hash", { durable: true });
      await probe.close().catch(() => undefined);
    });
  } catch (error) {
    await new Promise((resolve) => setImmediate(resolve));
    const text = [describeError(error), connectionError].filter(Boolean).join("; ");
    throw new InboxConfigError(
      /unknown exchange type|invalid exchange type/i.test(text)
        ? `exchange ${JSON.stringify(exchange)} needs the RabbitMQ plugin ${CONSISTENT_HASH_PLUGIN}, which this broker does not have enabled (${text}). ` +
          `Fix: rabbitmq-plugins enable ${CONSISTENT_HASH_PLUGIN} on every node of the cluster`
        : `exchange ${JSON.stringify(exchange)} cannot be declared as an x-consistent-hash exchange (${text}). ` +
          `Fix: delete the exchange of that name if it has another type, or choose another queue name`,
      { cause: error },
    );
  } finally {
    connection.off("error", onError);
  }
}

/**
 * Binds each partition queue to the consistent-hash exchange with weight "1", so that a routing
 * key (e.g. `<tenant>/<account>`) always lands in the same partition, and the partitions take
 * equal shares of the keys.
 */
export async function bindPartitionQueues(connection: ChannelModel, exchange: string, partitionQueues: readonly string[]): Promise<void> {
  for (const queue of partitionQueues) {
    await withProbe(connection, (probe) => probe.bindQueue(queue, exchange, "1"), (error) => new InboxConfigError(
      `cannot bind partition queue ${JSON.stringify(queue)} to exchange ${JSON.stringify(exchange)} (${describeError(error)})`, { cause: error },
    ));
  }
}
