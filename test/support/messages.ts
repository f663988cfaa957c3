import type { DeliveryInfo } from "../../src/core/handler.js";
import type { IncomingMessage } from "../../src/core/pipeline.js";

export interface MessageOptions {
  contentType?: string | undefined;
  contentEncoding?: string | undefined;
  queue?: string;
  redelivered?: boolean;
  messageId?: string;
  headers?: Record<string, unknown>;
}

/**
 * Builds the pipeline's view of a delivery. `body` is sent as is when it is a Buffer or a
 * string (so tests can send broken JSON), and as JSON text otherwise.
 */
export function incomingMessage(body: Buffer | string | object, options: MessageOptions = {}): IncomingMessage {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === "string" ? body : JSON.stringify(body), "utf8");
  const contentType = "contentType" in options ? options.contentType : "application/json";
  const delivery: DeliveryInfo = {
    queue: options.queue ?? "test.events",
    redelivered: options.redelivered ?? false,
    deliveryCount: undefined,
    messageId: options.messageId,
    timestamp: undefined,
    headers: options.headers ?? {},
  };
  return {
    body: bytes,
    contentType,
    contentEncoding: options.contentEncoding,
    delivery,
    describeProperties: () => JSON.stringify({ contentType, contentEncoding: options.contentEncoding, messageId: options.messageId, headers: delivery.headers }),
  };
}
