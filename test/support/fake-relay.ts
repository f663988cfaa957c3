import type { OutboxRow } from "../../src/core/store-contract/outbox-relay-store.js";
import type { FakeBroker } from "./fake-amqp.js";
import { NODE_A } from "./fake-consumer.js";

/** The queue the fake relay tests publish to (through the default exchange). */
export const RELAY_TEST_QUEUE = "orders";

/** Declares RELAY_TEST_QUEUE on the fake broker, so that the relay's publishes are routed. */
export async function declareRelayTestQueue(broker: FakeBroker): Promise<void> {
  const connection = await broker.connect(NODE_A);
  await (await connection.createChannel()).assertQueue(RELAY_TEST_QUEUE);
  await connection.close();
}

/** An unordered pending row for RELAY_TEST_QUEUE, message id `m-<id>`. */
export function relayTestRow(id: number): OutboxRow {
  return { id, messageId: `m-${id}`, exchange: "", routingKey: RELAY_TEST_QUEUE, body: Buffer.from("{}"), properties: {}, orderingKey: null, attempts: 0 };
}
