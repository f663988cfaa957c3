import type { Channel, ChannelModel } from "amqplib";
import { bindPartitionQueues, partitionQueueArguments, partitionQueueName, prepareTopology, preparePartitionExchange, retryQueueName } from "./topology.js";

/** What a consumer declares (or, with `declare` false, checks) on every new session. */
export interface ConsumerTopology {
  queue: string;
  /** Partitioned: `count` queues behind the consistent-hash `exchange` (default: the queue's name). */
  partitions: { count: number; exchange?: string } | undefined;
  queueArguments: Record<string, unknown> | undefined;
  quarantineQueue: string;
  retryDelays: readonly number[];
  declare: boolean;
}

/** The queues deliveries come from: the work queue, or every partition queue. */
function consumerQueues(queue: string, partitions: { count: number } | undefined): string[] {
  if (!partitions) return [queue];
  return Array.from({ length: partitions.count }, (_, p) => partitionQueueName(queue, p));
}

/** The partition number of a partition queue's name. */
export function partitionOf(queue: string): number {
  return Number(queue.slice(queue.lastIndexOf(".p") + 2));
}

/**
 * The work queue (or the partition exchange and its queues, bound), each with its quarantine
 * queue and delay queues. Rejects with InboxConfigError when something exists as configured
 * differently, or (declare false) does not exist.
 */
export async function prepareConsumerTopology(connection: ChannelModel, publishChannel: Channel, topology: ConsumerTopology): Promise<void> {
  const { queue, partitions, declare } = topology;
  const exchange = partitions ? partitions.exchange ?? queue : undefined;
  if (exchange !== undefined) await preparePartitionExchange(connection, exchange, declare);
  const queues = consumerQueues(queue, partitions);
  for (const workQueue of queues) {
    await prepareTopology(connection, publishChannel, {
      queue: workQueue, quarantineQueue: topology.quarantineQueue,
      queueArguments: partitions ? partitionQueueArguments(topology.queueArguments) : topology.queueArguments,
      retryQueues: topology.retryDelays.map((delayMs, i) => ({ name: retryQueueName(workQueue, i + 1), delayMs })),
      declare,
    });
  }
  if (exchange !== undefined && declare) await bindPartitionQueues(connection, exchange, queues);
}
