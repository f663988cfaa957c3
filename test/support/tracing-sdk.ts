/**
 * A real OpenTelemetry SDK for the tracing tests: a Node tracer provider (AsyncLocalStorage
 * context, W3C trace-context propagator) that keeps finished spans in memory. Registered for
 * the whole test file; `reset()` clears the spans between tests.
 */
import { context, propagation, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

export interface TracingSdk {
  exporter: InMemorySpanExporter;
  spans(): ReadableSpan[];
  /** The one finished span named `name` (fails when there is none or several). */
  one(name: string): ReadableSpan;
  reset(): void;
  shutdown(): Promise<void>;
}

export function registerTracingSdk(): TracingSdk {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  provider.register();
  return {
    exporter,
    spans: () => exporter.getFinishedSpans(),
    one(name) {
      const found = exporter.getFinishedSpans().filter((s) => s.name === name);
      if (found.length !== 1) throw new Error(`expected one span named ${name}, found ${found.length}: ${exporter.getFinishedSpans().map((s) => s.name).join(", ")}`);
      return found[0]!;
    },
    reset: () => exporter.reset(),
    async shutdown() {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** The parent span id of a finished span (SDK 2.x keeps it in the parent span context). */
export function parentSpanId(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

/** `00-<trace id>-<span id>-<flags>` split in its parts. */
export function parseTraceparent(value: unknown): { traceId: string; spanId: string } {
  const text = Buffer.isBuffer(value) ? value.toString("utf8") : String(value);
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(text);
  if (!match) throw new Error(`not a traceparent: ${text}`);
  return { traceId: match[1]!, spanId: match[2]! };
}

/** A producer span, ended, and the `traceparent` a producer would have sent with its message. */
export function producerTraceparent(name = "producer"): { traceparent: string; traceId: string; spanId: string } {
  const span = trace.getTracer("test-producer").startSpan(name);
  span.end();
  const { traceId, spanId } = span.spanContext();
  return { traceparent: `00-${traceId}-${spanId}-01`, traceId, spanId };
}
