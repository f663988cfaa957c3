/**
 * The ledger turns tracing on from OTEL_* variables when the SDK packages are installed (here:
 * the console exporter of @opentelemetry/sdk-trace-node, a dev dependency): its spans are
 * printed, per message under the producer's trace or per batch (the default) linked to it, and
 * the balance.changed message its relay publishes carries that trace. Without OTEL_* variables it prints no span and invents no traceparent.
 * Real broker, SQLite, the ledger as a child process.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { drainQueue, publishAll, waitFor } from "../support/broker.js";
import { createEmptyDatabase } from "../support/databases.js";
import { LedgerService, ledgerTopology } from "../support/rabbit-inbox-cli.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PRODUCER_TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

async function ledgerWith(env: Record<string, string>): Promise<{ ledger: LedgerService; queue: string }> {
  const database = await createEmptyDatabase("sqlite");
  cleanups.push(database.remove);
  const queue = `ri.test.otel.${randomBytes(4).toString("hex")}`;
  cleanups.push(await ledgerTopology(queue));
  const ledger = await LedgerService.start({ queue, databaseUrl: database.url, env });
  return { ledger, queue };
}

async function adjustWithTraceparent(queue: string): Promise<void> {
  await publishAll(queue, [{ type: "account.opened", tenant: "t1", event_id: "e-open", account_id: "a" }]);
  await publishAll(queue, [{ type: "balance.adjusted", tenant: "t1", event_id: "e-1", account_id: "a", delta_cents: 5 }], { headers: { traceparent: PRODUCER_TRACEPARENT } });
}

describe("the ledger's tracing from OTEL_* variables", () => {
  it("OTEL_TRACES_EXPORTER=console, LEDGER_PROCESS_SPANS=message: spans under the producer's trace, and balance.changed carries it", async () => {
    const { ledger, queue } = await ledgerWith({
      OTEL_TRACES_EXPORTER: "console", OTEL_SERVICE_NAME: "ledger-under-test", OTEL_BSP_SCHEDULE_DELAY: "100", LEDGER_PROCESS_SPANS: "message",
    });
    expect(ledger.logs.some((l) => l.msg === "tracing on" && l.exporter === "console")).toBe(true);
    await adjustWithTraceparent(queue);
    await ledger.waitForSettled(2);
    const sink = `${queue}.balance-changed.sink`;
    const changed: Awaited<ReturnType<typeof drainQueue>> = [];
    await waitFor(async () => { changed.push(...await drainQueue(sink)); return changed.length > 0; }, 20_000, "balance.changed published");
    expect(await ledger.stop()).toBe(0);

    const traceparent = String(changed[0]!.properties.headers!.traceparent);
    expect(traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
    expect(traceparent).not.toBe(PRODUCER_TRACEPARENT);
    const printed = ledger.stdout.join("\n");
    for (const name of [`process ${queue}`, "transaction ledger", `publish ${queue}.balance-changed`]) expect(printed).toContain(`name: '${name}'`);
    expect(printed).toContain(`traceId: '${TRACE_ID}'`);
    expect(printed).toContain("ledger-under-test");
  });

  it("by default: one span per batch, and balance.changed still carries the producer's trace", async () => {
    const { ledger, queue } = await ledgerWith({ OTEL_TRACES_EXPORTER: "console", OTEL_BSP_SCHEDULE_DELAY: "100" });
    await adjustWithTraceparent(queue);
    await ledger.waitForSettled(2);
    const changed: Awaited<ReturnType<typeof drainQueue>> = [];
    await waitFor(async () => { changed.push(...await drainQueue(`${queue}.balance-changed.sink`)); return changed.length > 0; }, 20_000, "balance.changed published");
    expect(await ledger.stop()).toBe(0);

    // The relay's publish is a child of the producer's span: the row stored the producer's context.
    expect(String(changed[0]!.properties.headers!.traceparent)).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
    const printed = ledger.stdout.join("\n");
    // One batch or two, as the two events happened to arrive.
    expect(printed).toMatch(/'messaging\.batch\.message_count': [12]\b/);
    expect(printed).toMatch(/'rabbit_inbox\.outcome_count\.applied': [12]\b/);
    expect(printed).not.toContain("'rabbit_inbox.outcome':");
    // The producer's span is the batch span's link, not its parent.
    expect(printed).toMatch(new RegExp(`links: \\[\\s*\\{\\s*context: \\{[^}]*traceId: '${TRACE_ID}'`));
  });

  it("refuses an unknown LEDGER_PROCESS_SPANS value at start", async () => {
    await expect(ledgerWith({ LEDGER_PROCESS_SPANS: "per-event" })).rejects.toThrow(/LEDGER_PROCESS_SPANS must be message or batch, got "per-event"/);
  });

  it("without OTEL_* variables: no span printed, no traceparent on what it publishes", async () => {
    const { ledger, queue } = await ledgerWith({ OTEL_TRACES_EXPORTER: "", OTEL_EXPORTER_OTLP_ENDPOINT: "", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "" });
    await publishAll(queue, [{ type: "account.opened", tenant: "t1", event_id: "e-open", account_id: "a" }]);
    await publishAll(queue, [{ type: "balance.adjusted", tenant: "t1", event_id: "e-1", account_id: "a", delta_cents: 5 }]);
    await ledger.waitForSettled(2);
    const changed: Awaited<ReturnType<typeof drainQueue>> = [];
    await waitFor(async () => { changed.push(...await drainQueue(`${queue}.balance-changed.sink`)); return changed.length > 0; }, 20_000, "balance.changed published");
    expect(await ledger.stop()).toBe(0);

    expect(changed[0]!.properties.headers ?? {}).not.toHaveProperty("traceparent");
    expect(ledger.logs.some((l) => l.msg === "tracing on")).toBe(false);
    expect(ledger.stdout.join("\n")).not.toContain("traceId:");
  });
});
