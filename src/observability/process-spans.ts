// Apart from message-trace.ts, which needs the OpenTelemetry API's types: the consumer's public
// options name this type, and an application without that optional peer must compile them.

/**
 * How deliveries get their process spans:
 * - `batch` (the consumer's default): one span per batch, linked to each message's producer span
 *   (the messaging conventions' batch processing), with the transaction as its child. A
 *   message's publishes and copies still continue its producer's trace. It costs next to nothing
 *   per message; the consumer's side of a message is a link rather than a child.
 * - `message` (the default in strict mode, where a batch is one message): a span per delivery,
 *   parented by its producer's span. Every message of a batch may come from another trace, and
 *   this keeps each of those traces one tree (producer, consumer, transaction, outbox, relay,
 *   downstream). The batch's transaction is one span, a child of its first message's span and
 *   linked to the others'. A span per message costs the consumer several microseconds of CPU
 *   per message.
 */
export type ProcessSpans = "message" | "batch";
