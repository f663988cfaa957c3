/** Which OTEL_* settings turn the ledger's tracing on, and with which exporter. */
import { describe, expect, it } from "vitest";
import { tracingSettingsFrom } from "../../examples/ledger/tracing.js";

describe("the ledger's tracing settings from OTEL_* variables", () => {
  it("stays off without any OTEL_* variable, with exporter none, and with OTEL_SDK_DISABLED=true", () => {
    expect(tracingSettingsFrom({})).toBeUndefined();
    expect(tracingSettingsFrom({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBeUndefined();
    expect(tracingSettingsFrom({ OTEL_TRACES_EXPORTER: "console", OTEL_SDK_DISABLED: "TRUE" })).toBeUndefined();
    expect(tracingSettingsFrom({ OTEL_SERVICE_NAME: "ledger-a" })).toBeUndefined();
  });

  it("uses OTLP when an endpoint is set without an exporter, and the exporter named otherwise", () => {
    expect(tracingSettingsFrom({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toEqual({ exporter: "otlp", serviceName: "ledger" });
    expect(tracingSettingsFrom({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" })).toEqual({ exporter: "otlp", serviceName: "ledger" });
    expect(tracingSettingsFrom({ OTEL_TRACES_EXPORTER: "console", OTEL_SERVICE_NAME: "ledger-a" })).toEqual({ exporter: "console", serviceName: "ledger-a" });
    expect(tracingSettingsFrom({ OTEL_TRACES_EXPORTER: " zipkin , otlp " })).toEqual({ exporter: "otlp", serviceName: "ledger" });
  });

  it("stays off for an exporter it does not know, even with an endpoint", () => {
    expect(tracingSettingsFrom({ OTEL_TRACES_EXPORTER: "zipkin", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBeUndefined();
  });
});
