import type { ConsumeMessage } from "amqplib";
import type { IncomingMessage } from "../core/incoming-message.js";

/**
 * The pipeline's view of an AMQP delivery: the body, its content type and encoding, and what
 * the pipeline judges it by (redelivered flag, quorum delivery count, message id, the AMQP
 * timestamp in seconds as a Date, headers), with the properties an operator sees in quarantine.
 * A property of the wrong type is left out rather than trusted.
 */
export function incomingMessageOf(message: ConsumeMessage, queue: string): IncomingMessage {
  const { properties, fields } = message;
  const headers = (properties.headers ?? {}) as Record<string, unknown>;
  const count = headers["x-delivery-count"];
  return {
    body: message.content,
    contentType: typeof properties.contentType === "string" ? properties.contentType : undefined,
    contentEncoding: typeof properties.contentEncoding === "string" ? properties.contentEncoding : undefined,
    delivery: {
      queue,
      redelivered: fields.redelivered,
      deliveryCount: typeof count === "number" ? count : undefined,
      messageId: typeof properties.messageId === "string" ? properties.messageId : undefined,
      timestamp: typeof properties.timestamp === "number" ? new Date(properties.timestamp * 1000) : undefined,
      headers,
    },
    describeProperties: () => safeJson({ fields: { exchange: fields.exchange, routingKey: fields.routingKey, redelivered: fields.redelivered }, properties }),
    // Present from the start, so that tracing a message does not change its shape.
    trace: undefined,
  };
}

function safeJson(value: unknown): string {
  try {
    // The replacer is handed a Buffer already turned into `{ type, data: [...] }` by its toJSON
    // (a number per byte): the holder's own value tells bytes apart, and only their count is kept.
    return JSON.stringify(value, function (this: Record<string, unknown>, key: string, v: unknown) {
      const own = this[key];
      return Buffer.isBuffer(own) ? `<${own.length} bytes>` : typeof v === "bigint" ? v.toString() : v;
    });
  } catch {
    return "{}";
  }
}
