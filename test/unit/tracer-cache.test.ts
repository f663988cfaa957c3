/**
 * The library keeps its tracer between spans, but only while the same provider is registered:
 * a provider registered later (or a replacement after `disable()`) must get the next span.
 */
import { ROOT_CONTEXT, context, trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it } from "vitest";
import { startPublishSpan } from "../../src/observability/tracing.js";

afterEach(() => {
  trace.disable();
  context.disable();
});

function provider(): { exporter: InMemorySpanExporter; provider: BasicTracerProvider } {
  const exporter = new InMemorySpanExporter();
  return { exporter, provider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }) };
}

const publishSpan = () => startPublishSpan(ROOT_CONTEXT, { exchange: "x", routingKey: "k", bodySize: 1 });

describe("the library's tracer", () => {
  it("follows the registered provider: none, then a first one, then its replacement", () => {
    const before = publishSpan();
    expect(before.isRecording()).toBe(false);
    before.end();

    const first = provider();
    trace.setGlobalTracerProvider(first.provider);
    publishSpan().end();
    publishSpan().end();
    expect(first.exporter.getFinishedSpans().map((s) => s.name)).toEqual(["publish x", "publish x"]);

    trace.disable();
    const second = provider();
    trace.setGlobalTracerProvider(second.provider);
    publishSpan().end();
    expect(second.exporter.getFinishedSpans()).toHaveLength(1);
    expect(first.exporter.getFinishedSpans()).toHaveLength(2);

    trace.disable();
    const after = publishSpan();
    expect(after.isRecording()).toBe(false);
    after.end();
    expect(second.exporter.getFinishedSpans()).toHaveLength(1);
  });
});
