/**
 * Tracing for the ledger from the standard OTEL_* variables, when the application has the
 * OpenTelemetry SDK packages installed. rabbit-inbox itself only uses @opentelemetry/api; the
 * SDK and the exporter are loaded here with dynamic imports, so the ledger runs without them
 * (tracing off, with a warning when the variables asked for it).
 *   OTEL_TRACES_EXPORTER          console | otlp | none; default otlp when an OTLP endpoint is set, else off
 *   OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   read by the OTLP exporter
 *   OTEL_SERVICE_NAME             default "ledger"
 *   OTEL_SDK_DISABLED=true        off
 * The sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG) and the batch processor
 * (OTEL_BSP_*) are read by the SDK itself.
 */
import type { Logger } from "../../src/index.js";

export interface TracingSettings {
  exporter: "console" | "otlp";
  serviceName: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** What the environment asks for; undefined when tracing stays off. */
export function tracingSettingsFrom(env: Env): TracingSettings | undefined {
  if ((env.OTEL_SDK_DISABLED ?? "").trim().toLowerCase() === "true") return undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  // The variable may list several exporters; the first one this example knows is used.
  const named = (env.OTEL_TRACES_EXPORTER ?? "").split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "");
  if (named.includes("none")) return undefined;
  const exporter = named.find((n): n is "console" | "otlp" => n === "console" || n === "otlp") ?? (named.length === 0 && endpoint ? "otlp" : undefined);
  if (!exporter) return undefined;
  return { exporter, serviceName: env.OTEL_SERVICE_NAME || "ledger" };
}

interface SpanExporterLike { export: unknown; shutdown(): Promise<void> }
interface TraceSdk {
  NodeTracerProvider: new (config: { resource?: unknown; spanProcessors: unknown[] }) => { register(): void; shutdown(): Promise<void> };
  BatchSpanProcessor: new (exporter: SpanExporterLike) => unknown;
  ConsoleSpanExporter: new () => SpanExporterLike;
}

/** A module by a name held in a variable: not resolved at compile time, absent is fine. */
async function optionalImport<T>(name: string): Promise<T | undefined> {
  try {
    return (await import(name)) as T;
  } catch {
    return undefined;
  }
}

/**
 * Registers a tracer provider as the environment asks, before the consumer and the relay start.
 * Resolves to what flushes and closes it at shutdown (a no-op when tracing is off).
 */
export async function startTracing(logger: Logger, env: Env = process.env): Promise<() => Promise<void>> {
  const off = () => Promise.resolve();
  const settings = tracingSettingsFrom(env);
  if (!settings) return off;
  const sdk = await optionalImport<TraceSdk>("@opentelemetry/sdk-trace-node");
  if (!sdk) {
    logger.warn("OTEL_* asks for traces, but @opentelemetry/sdk-trace-node is not installed: tracing is off", { exporter: settings.exporter });
    return off;
  }
  let exporter: SpanExporterLike;
  if (settings.exporter === "console") {
    exporter = new sdk.ConsoleSpanExporter();
  } else {
    const otlp = await optionalImport<{ OTLPTraceExporter: new () => SpanExporterLike }>("@opentelemetry/exporter-trace-otlp-http");
    if (!otlp) {
      logger.warn("OTEL_* asks for OTLP traces, but @opentelemetry/exporter-trace-otlp-http is not installed: tracing is off", {});
      return off;
    }
    exporter = new otlp.OTLPTraceExporter();
  }
  // A dependency of the SDK packages: present whenever they are, but not one of ours.
  const resources = await optionalImport<{ resourceFromAttributes(attributes: Record<string, string>): unknown }>("@opentelemetry/resources");
  const provider = new sdk.NodeTracerProvider({
    ...(resources ? { resource: resources.resourceFromAttributes({ "service.name": settings.serviceName }) } : {}),
    spanProcessors: [new sdk.BatchSpanProcessor(exporter)],
  });
  provider.register();
  logger.info("tracing on", { exporter: settings.exporter, service: settings.serviceName });
  return () => provider.shutdown();
}
