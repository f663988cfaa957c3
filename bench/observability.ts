/**
 * What the `observed` scenario turns on around the batched consumer: Prometheus metrics on a
 * prom-client registry and OpenTelemetry tracing with a real SDK whose batch processor exports
 * every span (to an exporter that drops them, so the figure is the library's and the SDK's
 * cost, not a collector's).
 */
import { context, propagation, trace } from "@opentelemetry/api";
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { Registry } from "prom-client";

class DroppingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: (result: { code: number }) => void): void {
    this.exported += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

export interface Observability {
  /** Undefined when only tracing is on. */
  registry: Registry | undefined;
  /** Flushes the spans, unregisters the SDK (the next scenarios run without it) and says how many spans and metric series there were. */
  stop(): Promise<{ spans: number; series: number }>;
}

/** Which half to turn on: both by default; `BENCH_OBSERVE=metrics` or `=tracing` to tell their costs apart. */
export type ObservedParts = "both" | "metrics" | "tracing";

export function observedParts(value = process.env.BENCH_OBSERVE): ObservedParts {
  if (value === undefined || value === "" || value === "both") return "both";
  if (value === "metrics" || value === "tracing") return value;
  throw new Error(`BENCH_OBSERVE=${value}: expected both, metrics or tracing`);
}

/** BENCH_TRACE_RATIO: the fraction of producer traces sampled in the observed comparison (default 1: every one). */
export function producerTraceRatio(value = process.env.BENCH_TRACE_RATIO): number {
  if (value === undefined || value === "") return 1;
  const ratio = Number(value);
  if (!(ratio >= 0 && ratio <= 1)) throw new Error(`BENCH_TRACE_RATIO=${value}: expected a fraction between 0 and 1`);
  return ratio;
}

/** BENCH_PROCESS_SPANS: the consumer's `processSpans` in the observed scenario; unset: the library's default (`batch`). */
export function benchProcessSpans(value = process.env.BENCH_PROCESS_SPANS): "message" | "batch" | undefined {
  if (value === undefined || value === "") return undefined;
  if (value === "message" || value === "batch") return value;
  throw new Error(`BENCH_PROCESS_SPANS=${value}: expected message or batch`);
}

export function startObservability(parts: ObservedParts = observedParts()): Observability {
  const exporter = new DroppingExporter();
  const provider = parts === "metrics" ? undefined : new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  provider?.register();
  const registry = new Registry();
  return {
    registry: parts === "tracing" ? undefined : registry,
    async stop() {
      if (provider) {
        await provider.forceFlush();
        await provider.shutdown();
        trace.disable();
        context.disable();
        propagation.disable();
      }
      const series = (await registry.getMetricsAsJSON()).reduce((n, metric) => n + (metric.values as unknown[]).length, 0);
      return { spans: exporter.exported, series };
    },
  };
}
