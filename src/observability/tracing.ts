import type { Attributes, Context, Link, Span, TextMapGetter, Tracer } from "@opentelemetry/api";
import { type OtelApi, otel } from "./otel-api.js";

/**
 * OpenTelemetry spans through the OpenTelemetry API only: without a registered SDK every call
 * here is the API's no-op (no span is recorded, no header is read or written), and without the
 * API installed nothing here runs at all (`tracingApi()` is undefined and callers skip their
 * spans), so the library costs next to nothing for applications that do not trace. Attribute names follow the
 * messaging semantic conventions for RabbitMQ; they are spelled out because the conventions
 * package is not a dependency.
 */
export function tracingApi(): typeof OtelApi | undefined {
  return otel;
}

/** The API's no-op provider, what the global proxy delegates to while no SDK registered one. */
let noopProvider: unknown;

/**
 * The API when something could come of a span or a propagated header: an SDK registered a
 * tracer provider, or a propagator is registered. Without either, every span would be the
 * API's no-op and every header extracted or injected empty, so per-message and per-row work
 * skips the spans altogether. Asked on every call, so an SDK registered later is used at once.
 */
export function tracingActive(): typeof OtelApi | undefined {
  if (!otel) return undefined;
  noopProvider ??= new otel.ProxyTracerProvider().getDelegate();
  const global = otel.trace.getTracerProvider() as { getDelegate?: () => unknown };
  const provider = typeof global.getDelegate === "function" ? global.getDelegate() : global;
  if (provider === noopProvider && otel.propagation.fields().length === 0) return undefined;
  return otel;
}

function api(): typeof OtelApi {
  if (!otel) throw new Error("@opentelemetry/api is not installed");
  return otel;
}

/** The tracer of the provider registered now, kept until another provider is registered. */
let cachedTracer: { provider: unknown; tracer: Tracer } | undefined;

export function tracer(): Tracer {
  // Keyed by the registered provider rather than kept for good: a provider registered (or
  // replaced) later is used at once. Asking the provider on every span costs a map lookup
  // behind a string key per message.
  const { trace } = api();
  const global = trace.getTracerProvider() as { getDelegate?: () => unknown };
  const provider = typeof global.getDelegate === "function" ? global.getDelegate() : global;
  if (cachedTracer && cachedTracer.provider === provider) return cachedTracer.tracer;
  cachedTracer = { provider, tracer: trace.getTracer("rabbit-inbox") };
  return cachedTracer.tracer;
}

export const ATTR = {
  system: "messaging.system",
  operationType: "messaging.operation.type",
  operationName: "messaging.operation.name",
  destination: "messaging.destination.name",
  routingKey: "messaging.rabbitmq.destination.routing_key",
  deliveryTag: "messaging.rabbitmq.message.delivery_tag",
  messageId: "messaging.message.id",
  bodySize: "messaging.message.body.size",
  batchCount: "messaging.batch.message_count",
  handler: "rabbit_inbox.handler",
  /** A batch span's queues, sorted, when its deliveries came from more than one (partitions). */
  queues: "rabbit_inbox.queues",
  outcome: "rabbit_inbox.outcome",
  /** A batch span's count of one outcome kind: `rabbit_inbox.outcome_count.<kind>`. */
  outcomeCount: "rabbit_inbox.outcome_count",
  duplicate: "rabbit_inbox.duplicate",
  quarantineReason: "rabbit_inbox.quarantine.reason",
  tenant: "rabbit_inbox.tenant",
  eventId: "rabbit_inbox.event_id",
  attempts: "rabbit_inbox.attempts",
  outboxRowId: "rabbit_inbox.outbox.row_id",
} as const;

/** The name a publish to the default exchange reports: the conventions' name for "". */
export function exchangeLabel(exchange: string): string {
  return exchange === "" ? "amq.default" : exchange;
}

/** Reads `traceparent` / `tracestate` from AMQP headers, which amqplib may hand over as Buffers. */
export const amqpHeaderGetter: TextMapGetter<Record<string, unknown>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    const value = carrier[key];
    if (typeof value === "string") return value;
    if (Buffer.isBuffer(value)) return value.toString("utf8");
    return undefined;
  },
};

/** The context a message's headers carry (the producer's span), or the root context. */
export function extractContext(headers: unknown): Context {
  const { ROOT_CONTEXT, propagation } = api();
  if (!headers || typeof headers !== "object") return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, headers as Record<string, unknown>, amqpHeaderGetter);
}

/**
 * The propagation headers of `ctx` (`traceparent`, `tracestate` with the W3C propagator), or
 * undefined when there is nothing to propagate: no propagator registered, or no valid span.
 */
export function propagationHeaders(ctx: Context): Record<string, string> | undefined {
  const { trace, isSpanContextValid, propagation } = api();
  const span = trace.getSpan(ctx);
  if (!span || !isSpanContextValid(span.spanContext())) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return Object.keys(carrier).length > 0 ? carrier : undefined;
}

/**
 * True when the span is recorded or carries a trace on (sampled out, its context still tells
 * the next hop not to sample): worth keeping. Without an SDK the API's span has the invalid
 * all-zero context, which a plain comparison tells apart more cheaply than validating both ids.
 */
export function spanMatters(span: Span): boolean {
  return span.isRecording() || span.spanContext().traceId !== api().INVALID_SPAN_CONTEXT.traceId;
}

export interface PublishSpanTarget {
  exchange: string;
  routingKey: string;
  messageId?: string | undefined;
  bodySize: number;
}

/** A producer span of a publish, per the conventions: `publish <exchange>`, operation type `send`. */
export function startPublishSpan(parent: Context, target: PublishSpanTarget, attributes: Attributes = {}, links?: Link[]): Span {
  const destination = exchangeLabel(target.exchange);
  return tracer().startSpan(`publish ${destination}`, {
    kind: api().SpanKind.PRODUCER,
    attributes: {
      [ATTR.system]: "rabbitmq", [ATTR.operationType]: "send", [ATTR.operationName]: "publish",
      [ATTR.destination]: destination, [ATTR.routingKey]: target.routingKey, [ATTR.bodySize]: target.bodySize,
      ...(target.messageId !== undefined ? { [ATTR.messageId]: target.messageId } : {}),
      ...attributes,
    },
    ...(links ? { links } : {}),
  }, parent);
}

/** Ends `span` after `work`, with an error status and the exception recorded when it rejects. */
export async function inSpan<T>(span: Span, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    failSpan(span, error);
    throw error;
  } finally {
    span.end();
  }
}

export function failSpan(span: Span, error: unknown, message?: string): void {
  if (!span.isRecording()) return;
  span.recordException(error instanceof Error ? error : String(error));
  markError(span, message ?? (error instanceof Error ? error.message : String(error)));
}

export function markError(span: Span, message: string): void {
  span.setStatus({ code: api().SpanStatusCode.ERROR, message });
}

/** Runs `work` with `ctx` active, so that spans and `ctx.publish` calls inside it belong to it. */
export function withContext<T>(ctx: Context, work: () => T): T {
  return api().context.with(ctx, work);
}

export function activeContext(): Context {
  return api().context.active();
}
