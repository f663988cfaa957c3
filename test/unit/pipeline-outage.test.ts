/**
 * The pipeline during a database outage (a refusal of every write, or a lost connection), with
 * the in-memory store: messages run one at a time stop at the first one given back, so that
 * none applies before it; and a redelivery count that fails because of the outage is not
 * replaced by the broker's delivery count, which the outage itself inflates.
 */
import { describe, expect, it } from "vitest";
import { StoreUnavailableError } from "../../src/core/errors.js";
import { eventKeyString } from "../../src/core/event.js";
import type { IncomingMessage } from "../../src/core/pipeline.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import type { Outcome } from "../../src/core/outcome.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";
import { incomingMessage } from "../support/messages.js";
import { type LogLine, recordingLogger } from "../support/recording-logger.js";

type Body = { tenant: string; event_id: string };

const refusal = () => new StoreUnavailableError("read-only", "PostgreSQL 10.0.0.1:5441 refuses work (read-only, 25006): read-only transaction", { node: "10.0.0.1:5441" });
const kinds = (outcomes: readonly Outcome[]) => outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));
const redelivered = (eventId: string, deliveryCount?: number): IncomingMessage => {
  const message = incomingMessage({ tenant: "t1", event_id: eventId }, { redelivered: true });
  return { ...message, delivery: { ...message.delivery, deliveryCount } };
};

/** A pipeline whose store refuses `refusals()` transactions from when `refusing` is switched on. */
function setup(maxDeliveries = 10) {
  const store = new MemoryStore();
  store.countRedeliveries = true;
  const state = { refusalsLeft: 0 };
  store.script = () => {
    if (state.refusalsLeft > 0) {
      state.refusalsLeft--;
      throw refusal();
    }
    return "commit";
  };
  const lines: LogLine[] = [];
  const attempted: string[] = [];
  const pipeline = new InboxPipeline<Body, MemoryHandle>({
    store, logger: recordingLogger(lines), maxDeliveries,
    retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, maxTotalMs: 1000 },
    handler: {
      name: "outage",
      handle(event, ctx) {
        attempted.push(event.event_id);
        ctx.tx.effects.push(event.event_id);
        // The database turns read-only right after the first event: its count and its three attempts are refused.
        if (event.event_id === "e-1") state.refusalsLeft = 4;
        return Promise.resolve();
      },
    },
  });
  return { store, pipeline, lines, attempted };
}

describe("messages run one at a time during an outage", () => {
  it("stop at the first one given back: the ones after it go back too, untried, even if the database is back by then", async () => {
    const { store, pipeline, attempted } = setup();
    // e-3 was counted before: this batch may hold a poison message, so each message runs alone.
    store.redeliveries.set(`outage\u0000${eventKeyString({ tenant: "t1", eventId: "e-3" })}`, 1);
    const outcomes = await pipeline.process([redelivered("e-1"), redelivered("e-2"), redelivered("e-3")]);
    expect(kinds(outcomes)).toEqual(["applied", "requeue", "requeue"]);
    expect(store.effects).toEqual(["e-1"]);
    // e-3 never ran: it would have committed (the refusals were used up) and overtaken e-2.
    expect(attempted).toEqual(["e-1"]);
    expect(outcomes[2]).toMatchObject({ kind: "requeue", key: { tenant: "t1", eventId: "e-3" } });
    expect((outcomes[2] as Extract<Outcome, { kind: "requeue" }>).error).toBeInstanceOf(StoreUnavailableError);
    expect(store.quarantined).toEqual([]);
  });
});

describe("a redelivery count the outage prevented", () => {
  it("is not replaced by the broker's delivery count: a message given back 50 times by an outage applies once the database is back", async () => {
    const { store, pipeline, lines } = setup(10);
    store.script = (attempt) => {
      if (attempt === 1) throw refusal(); // the count
      return "commit";
    };
    const outcomes = await pipeline.process([redelivered("e-9", 50)]);
    expect(kinds(outcomes)).toEqual(["applied"]);
    expect(store.quarantined).toEqual([]);
    expect(lines.some((l) => l.message.startsWith("could not count a redelivery"))).toBe(false);
  });
});
