export { InboxConsumer, type InboxConsumerOptions, type OutcomeCounts } from "./inbox-consumer.js";
export { ConfirmedPublisher } from "./confirmed-publisher.js";
export { DeliveryTracker } from "./delivery-tracker.js";
