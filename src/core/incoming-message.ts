import type { DeliveryInfo } from "./handler.js";

/** A message as the pipeline sees it: bytes plus broker-neutral delivery facts. */
export interface IncomingMessage {
  body: Buffer;
  contentType: string | undefined;
  contentEncoding: string | undefined;
  delivery: DeliveryInfo;
  /** AMQP properties as JSON text, kept with a quarantine entry. */
  describeProperties(): string;
  /** What the consumer's instrumentation keeps of this message while it is traced; opaque to the pipeline. */
  trace?: unknown;
}

/** A delivery the broker has handed out before (classic: the redelivered flag; quorum: a count). */
export function isRedelivery(delivery: DeliveryInfo): boolean {
  return delivery.redelivered || (delivery.deliveryCount ?? 0) > 0;
}
