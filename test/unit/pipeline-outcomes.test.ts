/**
 * The pipeline's settle decisions for database failures it cannot see through, and the order in
 * which a batch's claims reach the store, with an in-memory store that fails on cue. The real
 * stores are covered by the conformance suite and the integration tests; these tests pin what
 * must NOT happen (an ack-worthy outcome for a transaction that may not be durable, a delayed
 * retry or a quarantine for an outage, claims in delivery order) without a database.
 */
import { describe, expect, it } from "vitest";
import { CommitOutcomeUnknownError, TransientStoreError } from "../../src/core/errors.js";
import type { InboxHandler } from "../../src/core/handler.js";
import type { Outcome } from "../../src/core/outcome.js";
import { InboxPipeline, type PipelineOptions } from "../../src/core/pipeline.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";
import { incomingMessage } from "../support/messages.js";
import { type LogLine, recordingLogger } from "../support/recording-logger.js";

type Body = { tenant: string; event_id: string };

function setup(options: Partial<PipelineOptions<Body, MemoryHandle>> = {}) {
  const store = new MemoryStore();
  const lines: LogLine[] = [];
  const seen: string[] = [];
  const handler: InboxHandler<Body, MemoryHandle> = {
    name: "outcomes",
    handle(event, ctx) {
      seen.push(event.event_id);
      ctx.tx.effects.push(event.event_id);
      return Promise.resolve();
    },
  };
  const delayAsked: string[] = [];
  const pipeline = new InboxPipeline<Body, MemoryHandle>({
    store, handler, logger: recordingLogger(lines),
    retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, maxTotalMs: 1000 },
    canDelayRetry: (delivery) => { delayAsked.push(delivery.queue); return true; },
    ...options,
  });
  return { store, lines, seen, delayAsked, pipeline };
}

const message = (eventId: string, tenant = "t1") => incomingMessage({ tenant, event_id: eventId });
const kinds = (outcomes: readonly Outcome[]) => outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));
const retriesLogged = (lines: readonly LogLine[]) => lines.filter((l) => l.message === "transaction failed, retrying").length;

describe("database unreachable for longer than the in-process retries", () => {
  const unreachable = () => { throw new TransientStoreError("PostgreSQL connection lost: connect ECONNREFUSED 127.0.0.1:1", { kind: "connection" }); };

  it("gives a lone delivery back to the broker: requeue, never a delayed retry, never a quarantine", async () => {
    const { store, lines, delayAsked, pipeline } = setup();
    store.script = unreachable;
    const outcomes = await pipeline.process([message("e-1")]);
    expect(kinds(outcomes)).toEqual(["requeue"]);
    // Every in-process attempt was made, and then nothing else: no delayed retry was even
    // considered (a delivery could otherwise go through the delay queues and into quarantine
    // as retries_exhausted for an outage that says nothing about the message).
    expect(store.transactions).toBe(3);
    expect(retriesLogged(lines)).toBe(2);
    expect(delayAsked).toEqual([]);
    expect(store.quarantined).toEqual([]);
    expect(lines.filter((l) => l.level === "error").map((l) => l.message)).toEqual(["database unavailable after retries; deliveries go back to the broker"]);

    // The database is back: the redelivery applies once.
    store.script = () => "commit";
    expect(kinds(await pipeline.process([incomingMessage({ tenant: "t1", event_id: "e-1" }, { redelivered: true })]))).toEqual(["applied"]);
    expect(store.effects).toEqual(["e-1"]);
  });

  it("gives a whole batch back without isolating its messages one by one", async () => {
    const { store, lines, delayAsked, pipeline } = setup();
    store.script = unreachable;
    expect(kinds(await pipeline.process([message("e-1"), message("e-2"), message("e-3")]))).toEqual(["requeue", "requeue", "requeue"]);
    expect(store.transactions).toBe(3);
    expect(lines.some((l) => l.message.startsWith("batch failed; isolating"))).toBe(false);
    expect(delayAsked).toEqual([]);
    expect(store.quarantined).toEqual([]);
    expect(store.effects).toEqual([]);
  });
});

describe("COMMIT outcome unknown", () => {
  it("is never taken as applied: every delivery goes back to the broker, with no second attempt", async () => {
    const { store, lines, delayAsked, pipeline } = setup();
    store.script = () => "commit-unknown";
    store.commitUnknownError = new CommitOutcomeUnknownError("connection lost during COMMIT: Connection terminated unexpectedly");
    const outcomes = await pipeline.process([message("e-1"), message("e-2")]);
    expect(kinds(outcomes)).toEqual(["requeue", "requeue"]);
    expect(outcomes.map((o) => o.kind === "requeue" && o.error)).toEqual([store.commitUnknownError, store.commitUnknownError]);
    // Not retried in process (the dedup record of the redelivery decides), not delayed, not quarantined.
    expect(store.transactions).toBe(1);
    expect(retriesLogged(lines)).toBe(0);
    expect(delayAsked).toEqual([]);
    expect(store.quarantined).toEqual([]);
    expect(lines.map((l) => [l.level, l.message])).toEqual([["warn", "commit outcome unknown; the deliveries go back to the broker and the dedup record decides"]]);

    // This COMMIT did land: the redeliveries are duplicates, and the effects happened once.
    store.script = () => "commit";
    const again = await pipeline.process([incomingMessage({ tenant: "t1", event_id: "e-1" }, { redelivered: true }), incomingMessage({ tenant: "t1", event_id: "e-2" }, { redelivered: true })]);
    expect(kinds(again)).toEqual(["duplicate", "duplicate"]);
    expect(store.effects).toEqual(["e-1", "e-2"]);
  });
});

describe("a batch's claims", () => {
  it("reach the store in key order (tenant, then event id), while the handler sees delivery order", async () => {
    const { store, seen, lines, pipeline } = setup();
    const batch = [message("e-3"), message("e-10", "t0"), message("e-1"), incomingMessage("not json"), message("e-2"), message("e-1")];
    const outcomes = await pipeline.process(batch);
    expect(kinds(outcomes)).toEqual(["applied", "applied", "applied", "quarantined:invalid", "applied", "duplicate"]);
    // One claim call, sorted: concurrent batches then take the unique-index locks in one order,
    // and cannot deadlock on each other (a deadlock would be retried away, unseen).
    expect(store.claimCalls).toEqual([[
      { tenant: "t0", eventId: "e-10" }, { tenant: "t1", eventId: "e-1" }, { tenant: "t1", eventId: "e-2" }, { tenant: "t1", eventId: "e-3" },
    ]]);
    expect(seen).toEqual(["e-3", "e-10", "e-1", "e-2"]);
    expect(store.transactions).toBe(1);
    expect(retriesLogged(lines)).toBe(0);
  });
});

describe("contention that outlives the in-process retries", () => {
  const deadlock = () => new TransientStoreError("deadlock detected");

  it("a batch is isolated message by message, not delayed or quarantined as a whole", async () => {
    const { store, lines, delayAsked, pipeline } = setup();
    store.script = (attempt) => { if (attempt <= 3) throw deadlock(); return "commit"; };
    expect(kinds(await pipeline.process([message("e-1"), message("e-2")]))).toEqual(["applied", "applied"]);
    expect(lines.filter((l) => l.message === "batch failed; isolating its messages one by one")).toHaveLength(1);
    expect(store.transactions).toBe(5); // three for the batch, then one per message
    expect(delayAsked).toEqual([]);
    expect(store.quarantined).toEqual([]);
    expect(store.effects).toEqual(["e-1", "e-2"]);
  });

  it("a lone message gets a delayed retry while the broker layer can schedule one, and is not quarantined", async () => {
    const { store, delayAsked, pipeline } = setup();
    store.script = () => { throw deadlock(); };
    const [outcome] = await pipeline.process([message("e-1")]);
    expect(outcome).toMatchObject({ kind: "delayed", key: { tenant: "t1", eventId: "e-1" } });
    expect(delayAsked).toEqual(["test.events"]);
    expect(store.transactions).toBe(3);
    expect(store.quarantined).toEqual([]);
  });
});
