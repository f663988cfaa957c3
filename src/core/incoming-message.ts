import type { DeliveryInfo } from "./handler.js";

/** A message as the pipeline sees it: bytes plus broker-neutral delivery facts. */
export interface IncomingMessage {
  body: Buffer;
  contentType: string | undefined;
  contentEncoding: string | undefined;
  delivery: DeliveryInfo;
  /** AMQP properties as JSON text, kept with a quarantine entry. */
  describeProperties(): string;
}

/** A delivery the broker has handed out before (classic: the redelivered flag; quorum: a count). */
export function isRedelivery(delivery: DeliveryInfo): boolean {
  return delivery.redelivered || (delivery.deliveryCount ?? 0) > 0;
}
