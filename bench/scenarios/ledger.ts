/**
 * The `ledger` scenario: the ledger service as it ships (examples/ledger/main.ts) in this
 * process: openLedgerDatabase with its `balance.changed` exchange, the OutboxRelay and the
 * InboxConsumer with main.ts's settings (batch size 500, prefetch 1000, relay retry delays
 * 250-5000 ms, sent rows deleted once confirmed), relay started first. A plain amqplib consumer in a process of its own
 * (downstream-consumer.ts) takes every `balance.changed` from a queue bound to that exchange. Timed from the first event delivery:
 *   applied      until the inbox applied the last event (its transaction committed, acked);
 *   end to end   until the last `balance.changed` was received downstream.
 * Latency: delivery of the event to the ledger -> its `balance.changed` received downstream
 * (the events wait in a prepublished queue, so the time from their publish would only measure
 * the backlog). Paced (`--ledger-rate R`), the traffic process publishes the events during the
 * run at R per second instead, and the latency from each event's publish is measured too. The outbox backlog (rows not yet marked sent) is sampled every 250 ms.
 * With `--outbox-max-pending ROWS` the consumer runs with outboxBackpressure at that bound (LEDGER_OUTBOX_MAX_PENDING).
 */
import { InboxConsumer, OutboxRelay, outboxBackpressure } from "../../src/index.js";
import { silentLogger } from "../../src/core/logger.js";
import { openLedgerDatabase } from "../../examples/ledger/ledger-database.js";
import { readLedgerSettings } from "../../examples/ledger/settings.js";
import type { BenchDatabase } from "../databases/bench-database.js";
import { AMQP_URL, LatencyRecorder, eventIndex } from "../harness.js";
import { Downstream, type TrafficPacing } from "./downstream.js";
import type { DownstreamDone } from "./traffic-protocol.js";

/** examples/ledger/main.ts's defaults (LEDGER_BATCH_SIZE and LEDGER_PREFETCH unset). */
const LEDGER_BATCH_SIZE = 500;
const LEDGER_PREFETCH = 1000;
// The count visits every unsent row: sampled once a second, it takes little of the database from the ledger it measures.
const BACKLOG_SAMPLE_MS = 1000;

export interface LedgerMeasurement {
  /** First delivery to the last event applied. */
  seconds: number;
  /** First delivery to the last `balance.changed` received downstream. */
  endToEndSeconds: number;
  /** Inbox: delivery to settle. */
  latency: LatencyRecorder;
  /** Delivery of the event to its `balance.changed` received downstream. */
  endToEndLatency: LatencyRecorder;
  maxBacklog: number;
  /** Outbox rows pending when the last event was applied. */
  backlogAtApplied: number;
  /** `balance.changed` received more than once before the last new one (the relay publishes at least once). */
  duplicates: number;
  /** The downstream consumer's CPU per message (its own process; with pacing, the producer's too). */
  downstreamCpuUsPerMsg: number;
  /** Paced: publish of the event -> its `balance.changed` received, and the rate it was published at. */
  publishToReceived?: LatencyRecorder;
  publishedPerSec?: number;
  /** RSS (MB) when a quarter, half, three quarters and all of the events had been applied. */
  rssAtQuarterMb: number[];
}

/**
 * `measured` is called once everything arrived, before the service's connections close: the
 * caller reads /proc there, while the database sessions that did the work still exist.
 */
export async function runLedger(
  db: BenchDatabase, queue: string, n: number, queueArguments: Record<string, unknown>, measured: () => void, pacing?: TrafficPacing,
  outboxMaxPending?: number,
): Promise<LedgerMeasurement> {
  // Per event, allocated and written to up front so that they add nothing to RSS during the run.
  const deliveredAt = new Float64Array(n).fill(-1);
  const latency = new LatencyRecorder();
  const endToEndLatency = new LatencyRecorder();
  const rssAtQuarterMb: number[] = [];
  let firstDelivery = Infinity;
  let applied = 0;
  let appliedAt = 0;
  let receivedAllAt = 0;
  let failure: Error | undefined;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => { finish = resolve; });
  const fail = (error: Error) => { failure ??= error; finish(); };

  const downstream = await Downstream.start(queue, n, pacing);
  const exchange = downstream.exchange;
  let downstreamDone: DownstreamDone | undefined;
  downstream.done.then((done) => {
    downstreamDone = done;
    receivedAllAt = done.receivedAllAt - performance.timeOrigin;
    if (appliedAt > 0) finish();
  }, fail);

  const ledger = await openLedgerDatabase(db.url, silentLogger, { balanceChangedExchange: exchange });
  const relay = new OutboxRelay({
    url: AMQP_URL, store: ledger.outbox!, logger: silentLogger,
    topology: async (channel) => { await channel.assertExchange(exchange, "fanout", { durable: true }); },
    retryBaseDelayMs: 250, retryMaxDelayMs: 5000, sentRetentionMs: readLedgerSettings({}).outboxSentRetentionMs,
    // BENCH_OUTBOX_HANDOFF=0: every row through a claim, as before rows went out from memory (an A/B, not the product).
    ...(process.env.BENCH_OUTBOX_HANDOFF === "0" ? { handoff: false } : {}),
  });
  const consumer = new InboxConsumer({
    url: AMQP_URL, queue, store: ledger.store, handler: ledger.handler, logger: silentLogger,
    batchSize: LEDGER_BATCH_SIZE, prefetch: LEDGER_PREFETCH, queueArguments,
    ...(outboxMaxPending ? { backpressure: outboxBackpressure({ store: ledger.outbox!, maxPending: outboxMaxPending }) } : {}),
    onOutcome: (outcome, timing) => {
      if (outcome.kind !== "applied") return fail(new Error(`ledger: unexpected outcome ${outcome.kind}`));
      const now = performance.now();
      const delivered = now - timing.latencyMs;
      firstDelivery = Math.min(firstDelivery, delivered);
      deliveredAt[eventIndex(outcome.key.eventId)] = delivered;
      latency.record(timing.latencyMs);
      applied++;
      if (applied % Math.max(1, Math.floor(n / 4)) === 0 && rssAtQuarterMb.length < 4) {
        rssAtQuarterMb.push(Math.round(process.memoryUsage().rss / 1024 / 1024));
      }
      if (applied === n) {
        appliedAt = now;
        if (receivedAllAt > 0) finish();
      }
    },
  });

  let maxBacklog = 0;
  let backlogAtApplied = -1;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const pending = await db.pendingOutbox();
      maxBacklog = Math.max(maxBacklog, pending);
      if (appliedAt > 0 && backlogAtApplied < 0) backlogAtApplied = pending;
      await new Promise((resolve) => setTimeout(resolve, BACKLOG_SAMPLE_MS));
    }
  })().catch((error: unknown) => fail(error instanceof Error ? error : new Error(String(error))));

  try {
    await relay.start();
    await consumer.start();
    if (pacing) downstream.startPublishing();
    await finished;
    if (failure) throw failure;
    await downstream.exited;
    measured();
    const receivedAt = downstream.receivedAt();
    for (let i = 0; i < n; i++) endToEndLatency.record(receivedAt[i]! - performance.timeOrigin - deliveredAt[i]!);
    let publishToReceived: LatencyRecorder | undefined;
    if (pacing) {
      const publishedAt = downstream.publishedAt();
      publishToReceived = new LatencyRecorder();
      for (let i = 0; i < n; i++) publishToReceived.record(receivedAt[i]! - publishedAt[i]!);
    }
    return {
      seconds: (appliedAt - firstDelivery) / 1000,
      endToEndSeconds: (receivedAllAt - firstDelivery) / 1000,
      latency, endToEndLatency, maxBacklog, backlogAtApplied: Math.max(0, backlogAtApplied), rssAtQuarterMb,
      duplicates: downstreamDone!.duplicates, downstreamCpuUsPerMsg: Math.round(downstreamDone!.cpuUs / n),
      ...(publishToReceived ? { publishToReceived, publishedPerSec: downstreamDone!.publishedPerSec ?? 0 } : {}),
    };
  } finally {
    sampling = false;
    await sampler;
    await consumer.stop();
    await relay.stop();
    await ledger.close();
    await downstream.close();
  }
}
