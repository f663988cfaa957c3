export { InboxConsumer, type InboxConsumerOptions, type OutcomeCounts, type PartitionOptions } from "./inbox-consumer.js";
export { BrokerConnector, brokerUrlList, brokerNodeLabel } from "./broker-connection.js";
export { ConfirmedPublisher } from "./confirmed-publisher.js";
export { DeliveryTracker } from "./delivery-tracker.js";
