import { createRequire } from "node:module";
import type * as OtelApi from "@opentelemetry/api";

export type { OtelApi };

/**
 * The OpenTelemetry API when the application has it installed, else undefined: it is an
 * optional peer dependency, so its absence must not fail the import of this library. Loaded
 * synchronously through require: the API keeps its registered SDK on a process-wide global, so
 * this copy sees the provider an ESM application registered through its own import.
 */
export const otel: typeof OtelApi | undefined = loadApi();

function loadApi(): typeof OtelApi | undefined {
  try {
    return createRequire(import.meta.url)("@opentelemetry/api") as typeof OtelApi;
  } catch {
    return undefined;
  }
}
