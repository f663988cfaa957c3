/**
 * The ledger's operator endpoints (LEDGER_METRICS_PORT) with the real broker behind a TCP proxy:
 * /readyz says 200 while the ledger consumes, 503 once the broker connection is cut (while
 * /healthz still says 200), and 200 again once the broker is back; /metrics parses and counts
 * what the ledger applied.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { amqpUrlFromEnv } from "../../examples/ledger/driver/ledger-environment.js";
import { waitUntil } from "../../examples/ledger/driver/wait-until.js";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { ExchangeTap } from "../support/outbox.js";
import { parsePrometheusText, sampleValue } from "../support/prometheus-text.js";
import { TcpProxy } from "../support/tcp-proxy.js";

async function get(url: string): Promise<{ status: number; body: string; contentType: string | null }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  return { status: response.status, body: await response.text(), contentType: response.headers.get("content-type") };
}

/** Polls `check` every 100 ms; fails after `timeoutMs` (default 30 s), naming `what`. */
const until = (check: () => Promise<boolean>, what: string, timeoutMs = 30_000) =>
  waitUntil(async () => ((await check()) ? true : undefined), what, { timeoutMs, intervalMs: 100 });

describe("ledger metrics and probes", () => {
  const ctx = useLedgerTest("sqlite");
  let proxy: TcpProxy;
  let tap: ExchangeTap | undefined;

  beforeEach(async () => {
    const broker = new URL(amqpUrlFromEnv());
    proxy = new TcpProxy({ host: broker.hostname, port: Number(broker.port || 5672) });
    await proxy.start();
  });

  afterEach(async () => {
    await tap?.close();
    tap = undefined;
    await proxy.stop();
  });

  it("serves /readyz 200 while consuming, 503 while the broker is cut off, 200 once it is back; /metrics parses", async () => {
    const broker = new URL(amqpUrlFromEnv());
    broker.host = `127.0.0.1:${proxy.port}`;
    const ledger = await ctx.start({ amqpUrl: broker.toString(), metricsPort: 0 });
    const base = ledger.metricsUrl!;
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    expect((await get(`${base}/healthz`)).status).toBe(200);
    const ready = await get(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toMatchObject({ ready: true, broker: true, consuming: true, database: true });

    // Something bound to the exchange of balance.changed, or the outbox's publishes come back unroutable.
    tap = await ExchangeTap.open(`${ctx.queue}.balance-changed`);
    await ctx.broker.publish(ctx.queue, [accountOpened("t1", "e-1", "acc-1"), balanceAdjusted("t1", "e-2", "acc-1", 500), "{not json"]);
    await ctx.broker.waitForNoReady(ctx.queue, { watch: [ledger] });
    let metrics!: ReturnType<typeof parsePrometheusText>;
    await until(async () => {
      metrics = parsePrometheusText((await get(`${base}/metrics`)).body);
      return (sampleValue(metrics, "rabbit_inbox_messages_total", { queue: ctx.queue, outcome: "quarantined" }) ?? 0) === 1;
    }, "the quarantined message counted");
    const scrape = await get(`${base}/metrics`);
    expect(scrape.status).toBe(200);
    expect(scrape.contentType).toMatch(/^text\/plain/);
    metrics = parsePrometheusText(scrape.body);
    expect(sampleValue(metrics, "rabbit_inbox_messages_total", { queue: ctx.queue, outcome: "applied" })).toBe(2);
    expect(sampleValue(metrics, "rabbit_inbox_quarantined_total", { queue: ctx.queue, reason: "invalid" })).toBe(1);
    expect(sampleValue(metrics, "rabbit_inbox_broker_connected", { role: "consumer", queue: ctx.queue })).toBe(1);
    expect(sampleValue(metrics, "rabbit_inbox_reconnects_total", { role: "consumer", queue: ctx.queue })).toBe(0);
    // Read at most once per 15 s: an earlier scrape may have sampled it before the quarantine row committed.
    await until(async () => sampleValue(parsePrometheusText((await get(`${base}/metrics`)).body), "rabbit_inbox_quarantine_held") === 1, "the quarantine entry held", 40_000);
    // The adjustment published balance.changed through the outbox.
    await until(async () => sampleValue(parsePrometheusText((await get(`${base}/metrics`)).body), "rabbit_inbox_outbox_published_total") === 1, "the outbox row published");
    expect(tap.messages).toHaveLength(1);

    await proxy.stop();
    await until(async () => (await get(`${base}/readyz`)).status === 503, "/readyz to say 503 with the broker cut off");
    const notReady = JSON.parse((await get(`${base}/readyz`)).body) as Record<string, unknown>;
    expect(notReady).toMatchObject({ ready: false, broker: false, database: true });
    expect((await get(`${base}/healthz`)).status).toBe(200);
    expect(sampleValue(parsePrometheusText((await get(`${base}/metrics`)).body), "rabbit_inbox_broker_connected", { role: "consumer", queue: ctx.queue })).toBe(0);

    await proxy.start();
    await until(async () => (await get(`${base}/readyz`)).status === 200, "/readyz to say 200 again with the broker back");
    const after = parsePrometheusText((await get(`${base}/metrics`)).body);
    expect(sampleValue(after, "rabbit_inbox_broker_connected", { role: "consumer", queue: ctx.queue })).toBe(1);
    expect(sampleValue(after, "rabbit_inbox_reconnects_total", { role: "consumer", queue: ctx.queue })).toBeGreaterThanOrEqual(1);
    // /readyz waits for the relay too: it reconnected through the same proxy.
    expect(sampleValue(after, "rabbit_inbox_broker_connected", { role: "relay" })).toBe(1);
    expect(sampleValue(after, "rabbit_inbox_reconnects_total", { role: "relay" })).toBeGreaterThanOrEqual(1);

    // Still consuming after the reconnect.
    await ctx.broker.publish(ctx.queue, [balanceAdjusted("t1", "e-3", "acc-1", 250)]);
    await until(async () => sampleValue(parsePrometheusText((await get(`${base}/metrics`)).body), "rabbit_inbox_messages_total", { queue: ctx.queue, outcome: "applied" }) === 3, "the third event applied");
    const [exit] = await ctx.stopWhenIdle([ledger]);
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it("serves nothing without LEDGER_METRICS_PORT", async () => {
    const ledger = await ctx.start();
    expect(ledger.metricsUrl).toBeUndefined();
    expect(ledger.stdout.some((l) => l.includes("metrics on"))).toBe(false);
  });
});
