import type { IncomingMessage } from "./incoming-message.js";
import type { Outcome } from "./outcome.js";

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

/** What names and describes a delivery's process span; asked only of deliveries that get one. */
export interface DeliveryFacts {
  queue: string;
  routingKey: string;
  deliveryTag: number;
  handler: string;
}

/**
 * How a message's way from delivery to ack is traced, seen from the pipeline and the consumer:
 * a process span per delivery or per batch, a span per transaction attempt, and the context a
 * handler runs and publishes in. The consumer passes one to its pipeline (the OpenTelemetry one
 * of src/observability); without it nothing is traced. What it keeps of a message travels on the
 * message (`IncomingMessage.trace`), so a message that is dropped takes its trace with it.
 * Contexts are opaque here: only the implementation reads them.
 */
export interface Instrumentation {
  /** Starts the process spans of a batch's deliveries, as `mode` says. */
  startDeliveries<D extends { incoming: IncomingMessage }>(deliveries: readonly D[], facts: (delivery: D) => DeliveryFacts, mode: ProcessSpans): void;
  /** Ends the process spans of a settled batch with what became of each message. */
  deliveriesSettled(messages: readonly IncomingMessage[], outcomes: readonly Outcome[]): void;
  /** Ends the process spans of a batch the pipeline could not process at all. */
  deliveriesFailed(messages: readonly IncomingMessage[], error: unknown): void;
  /** Runs one transaction attempt over `messages`, in a span of its own when they are traced. */
  transaction<T>(handler: string, messages: readonly IncomingMessage[], attempt: number, work: () => Promise<T>): Promise<T>;
  /** Whether what `message`'s handler publishes continues a context of the message's own. */
  ownsContext(message: IncomingMessage): boolean;
  /** The context `message`'s handler works in; undefined: whatever context is active. */
  handlerContext(message: IncomingMessage): unknown;
  /** Runs `work` with `context` (one `handlerContext` returned) active. */
  inContext<T>(context: unknown, work: () => T): T;
  /** The headers of an outbox row written now, with what carries the active trace on to the relay. */
  traceHeaders<H>(headers: H): H | Record<string, string>;
}

/** What the pipeline reports about its transactions. */
export interface TransactionMetrics {
  /** A transaction committed, `seconds` after it began. */
  transactionCommitted(seconds: number): void;
  /** A transaction failed and runs again after a backoff; `kind` is the error's catalogue kind. */
  transactionRetried(kind: string): void;
}

/** Metrics off: every call is an empty function, so the hot path pays a call and nothing else. */
export const noTransactionMetrics: TransactionMetrics = { transactionCommitted: () => {}, transactionRetried: () => {} };

/** Traces nothing: every span is skipped and every context is whatever is active. */
export const noInstrumentation: Instrumentation = {
  startDeliveries: () => {},
  deliveriesSettled: () => {},
  deliveriesFailed: () => {},
  transaction: (_handler, _messages, _attempt, work) => work(),
  ownsContext: () => false,
  handlerContext: () => undefined,
  inContext: (_context, work) => work(),
  traceHeaders: (headers) => headers,
};
