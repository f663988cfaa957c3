/**
 * The pipeline's own decisions, with the in-memory store: which handlers it accepts, how long
 * it retries in process, what it writes to quarantine and in which order, and the log lines an
 * operator relies on to see it (message and the fields that say which event and why). The
 * settle decisions for database failures are in pipeline-outcomes.test.ts.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { CommitOutcomeUnknownError, InboxConfigError, PermanentEventError, TransientStoreError } from "../../src/core/errors.js";
import type { InboxHandler } from "../../src/core/handler.js";
import type { Outcome } from "../../src/core/outcome.js";
import { InboxPipeline, type PipelineOptions } from "../../src/core/pipeline.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";
import { incomingMessage } from "../support/messages.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";

type Body = { tenant: string; event_id: string; amount?: number };

function setup(options: Partial<PipelineOptions<Body, MemoryHandle>> = {}) {
  const store = new MemoryStore();
  const lines: LogLine[] = [];
  const handler: InboxHandler<Body, MemoryHandle> = {
    name: "decisions",
    handle(event, ctx) {
      ctx.tx.effects.push(event.event_id);
      return Promise.resolve();
    },
  };
  const pipeline = new InboxPipeline<Body, MemoryHandle>({
    store, handler, logger: recordingLogger(lines),
    retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, maxTotalMs: 1000 },
    ...options,
  });
  return { store, lines, pipeline };
}

const message = (eventId: string, extra: Record<string, unknown> = {}) => incomingMessage({ tenant: "t1", event_id: eventId, ...extra });
const kinds = (outcomes: readonly Outcome[]) => outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));
const deadlock = () => new TransientStoreError("deadlock detected");

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the handler a pipeline accepts", () => {
  const store = new MemoryStore();
  const logger = recordingLogger([]);
  const handle = () => Promise.resolve();

  it("refuses a handler without a name: the name is the dedup scope", () => {
    for (const handler of [undefined, {}, { name: 7, handle }, { name: "", handle }]) {
      expect(() => new InboxPipeline({ store, logger, handler: handler as unknown as InboxHandler<unknown, MemoryHandle> }))
        .toThrow(new InboxConfigError("handler.name must be a non-empty string: it is the dedup scope"));
    }
  });

  it("refuses a handler with neither handle() nor handleBatch(), naming it", () => {
    expect(() => new InboxPipeline({ store, logger, handler: { name: "ledger" } })).toThrow(InboxConfigError);
    expect(() => new InboxPipeline({ store, logger, handler: { name: "ledger" } })).toThrow("handler ledger needs handle() or handleBatch()");
  });

  it("accepts either one, and names itself after the handler", () => {
    expect(new InboxPipeline({ store, logger, handler: { name: "one", handle } }).handlerName).toBe("one");
    expect(new InboxPipeline({ store, logger, handler: { name: "batch", handleBatch: () => Promise.resolve() } }).handlerName).toBe("batch");
  });
});

describe("the in-process retry budget", () => {
  /** A clock the test moves: the pipeline measures the time its retries took with Date.now. */
  function controlledClock() {
    const clock = { now: 1_000_000 };
    vi.spyOn(Date, "now").mockImplementation(() => clock.now);
    // Full jitter at its top: every delay is the policy's ceiling, 4 ms here.
    vi.spyOn(Math, "random").mockReturnValue(1);
    return clock;
  }

  it("retries while the time spent plus the next delay stays within maxTotalMs, the boundary included", async () => {
    const clock = controlledClock();
    const { store, lines, pipeline } = setup({
      retry: { maxAttempts: 10, baseDelayMs: 4, maxDelayMs: 4, maxTotalMs: 10 }, canDelayRetry: () => true,
    });
    // Attempt 2 starts 6 ms in (6 + 4 = 10: still within), attempt 3 at 7 ms (7 + 4 > 10: the last).
    store.script = (attempt) => {
      if (attempt === 2) clock.now += 6;
      if (attempt === 3) clock.now += 1;
      throw deadlock();
    };
    const outcomes = await pipeline.process([message("e-1")]);
    expect(kinds(outcomes)).toEqual(["delayed"]);
    expect(store.transactions).toBe(3);
    expect(logged(lines, "transaction failed, retrying").map((l) => l.fields?.delayMs)).toEqual([4, 4]);
  });

  it("stops at maxAttempts however much time is left", async () => {
    controlledClock();
    const { store, pipeline } = setup({ retry: { maxAttempts: 4, baseDelayMs: 1, maxDelayMs: 1, maxTotalMs: 60_000 }, canDelayRetry: () => true });
    store.script = () => { throw deadlock(); };
    expect(kinds(await pipeline.process([message("e-1")]))).toEqual(["delayed"]);
    expect(store.transactions).toBe(4);
  });

  it("does not retry at all when the first delay would already pass maxTotalMs", async () => {
    controlledClock();
    const { store, lines, pipeline } = setup({ retry: { maxAttempts: 10, baseDelayMs: 4, maxDelayMs: 4, maxTotalMs: 3 }, canDelayRetry: () => true });
    store.script = () => { throw deadlock(); };
    expect(kinds(await pipeline.process([message("e-1")]))).toEqual(["delayed"]);
    expect(store.transactions).toBe(1);
    expect(logged(lines, "transaction failed, retrying")).toEqual([]);
  });
});

describe("the log lines an operator relies on", () => {
  it("each in-process retry: handler, attempt, delay, batch size, error kind and error", async () => {
    const { store, lines, pipeline } = setup({ canDelayRetry: () => true });
    store.script = (attempt) => { if (attempt === 1) throw deadlock(); return "commit"; };
    expect(kinds(await pipeline.process([message("e-1"), message("e-2")]))).toEqual(["applied", "applied"]);
    const [line, ...more] = logged(lines, "transaction failed, retrying");
    expect(more).toEqual([]);
    expect(line!.level).toBe("warn");
    expect(line!.fields).toEqual({
      handler: "decisions", attempt: 1, delayMs: expect.any(Number) as number, messages: 2, errorKind: "transient", error: "deadlock detected",
    });
  });

  it("database unavailable: at error level, with the attempts made and the error", async () => {
    const { store, lines, pipeline } = setup();
    store.script = () => { throw new TransientStoreError("connect ECONNREFUSED 127.0.0.1:5432", { kind: "connection" }); };
    expect(kinds(await pipeline.process([message("e-1")]))).toEqual(["requeue"]);
    expect(logged(lines, "database unavailable after retries; deliveries go back to the broker")).toEqual([{
      level: "error", message: "database unavailable after retries; deliveries go back to the broker",
      fields: { handler: "decisions", attempts: 3, error: "connect ECONNREFUSED 127.0.0.1:5432" },
    }]);
  });

  it("commit outcome unknown: the batch size and the error", async () => {
    const { store, lines, pipeline } = setup();
    store.script = () => "commit-unknown";
    store.commitUnknownError = new CommitOutcomeUnknownError("Connection terminated during COMMIT");
    expect(kinds(await pipeline.process([message("e-1"), message("e-2"), message("e-3")]))).toEqual(["requeue", "requeue", "requeue"]);
    expect(lines).toEqual([{
      level: "warn", message: "commit outcome unknown; the deliveries go back to the broker and the dedup record decides",
      fields: { handler: "decisions", messages: 3, error: "Connection terminated during COMMIT" },
    }]);
  });

  it("retries exhausted with no delayed retry left: quarantined, logged at error with the event's identity", async () => {
    const asked: string[] = [];
    const { store, lines, pipeline } = setup({ canDelayRetry: (d) => { asked.push(d.queue); return false; } });
    let failing = true;
    store.script = () => { if (failing) throw deadlock(); return "commit"; };
    // The event's transaction fails on every attempt; the quarantine's own transaction commits.
    const original = store.transaction.bind(store);
    vi.spyOn(store, "transaction").mockImplementation((work, beforeCommit) => {
      failing = store.transactions < 3;
      return original(work, beforeCommit);
    });
    const [outcome] = await pipeline.process([message("e-7")]);
    expect(asked).toEqual(["test.events"]);
    expect(outcome).toMatchObject({ kind: "quarantined", reason: "retries_exhausted", detail: "gave up after 3 attempts: deadlock detected", key: { tenant: "t1", eventId: "e-7" } });
    expect(store.quarantined.map((r) => [r.reason, r.detail, r.key?.eventId])).toEqual([["retries_exhausted", "gave up after 3 attempts: deadlock detected", "e-7"]]);
    expect(store.effects).toEqual([]);
    expect(logged(lines, "retries exhausted; event quarantined")).toEqual([{
      level: "error", message: "retries exhausted; event quarantined",
      fields: { handler: "decisions", tenant: "t1", eventId: "e-7", error: "deadlock detected" },
    }]);
  });

  it("a quarantine row that cannot be written: the delivery goes back to the broker, and the line says why", async () => {
    const { store, lines, pipeline } = setup({ canDelayRetry: () => false });
    store.script = () => { throw deadlock(); };
    const [outcome] = await pipeline.process([message("e-8")]);
    expect(outcome).toMatchObject({ kind: "requeue", key: { tenant: "t1", eventId: "e-8" } });
    expect(store.transactions).toBe(4); // three attempts, then the quarantine's own transaction
    expect(store.quarantined).toEqual([]);
    expect(logged(lines, "could not record a quarantine entry; the delivery goes back to the broker")).toEqual([{
      level: "error", message: "could not record a quarantine entry; the delivery goes back to the broker",
      fields: { handler: "decisions", error: "deadlock detected" },
    }]);
    expect(logged(lines, "retries exhausted; event quarantined")).toEqual([]);
  });

  it("a delayed retry for a lone message: which event, and the error", async () => {
    const { store, lines, pipeline } = setup({ canDelayRetry: () => true });
    store.script = () => { throw deadlock(); };
    const [outcome] = await pipeline.process([message("e-9")]);
    expect(outcome).toEqual({ kind: "delayed", key: { tenant: "t1", eventId: "e-9" }, detail: "failed 3 times: deadlock detected" });
    expect(logged(lines, "transient failures outlived the in-process retries; scheduling a delayed retry")).toEqual([{
      level: "warn", message: "transient failures outlived the in-process retries; scheduling a delayed retry",
      fields: { handler: "decisions", tenant: "t1", eventId: "e-9", error: "deadlock detected" },
    }]);
  });

  it("a batch isolated message by message: which handler, how many messages", async () => {
    const { store, lines, pipeline } = setup();
    store.script = (attempt) => { if (attempt <= 3) throw deadlock(); return "commit"; };
    await pipeline.process([message("e-1"), message("e-2")]);
    expect(logged(lines, "batch failed; isolating its messages one by one")).toEqual([{
      level: "warn", message: "batch failed; isolating its messages one by one", fields: { handler: "decisions", messages: 2 },
    }]);
  });

  it("a payload conflict: at error level, with both fingerprints", async () => {
    const { store, lines, pipeline } = setup();
    await pipeline.process([message("e-1", { amount: 1 })]);
    const [outcome] = await pipeline.process([message("e-1", { amount: 2 })]);
    expect(outcome?.kind).toBe("quarantined");
    const record = store.quarantined[0]!;
    expect(record.storedFingerprint).not.toBe(record.fingerprint);
    expect(logged(lines, "payload conflict: same event id, different payload; quarantined, not applied")).toEqual([{
      level: "error", message: "payload conflict: same event id, different payload; quarantined, not applied",
      fields: { handler: "decisions", tenant: "t1", eventId: "e-1", storedFingerprint: record.storedFingerprint, fingerprint: record.fingerprint },
    }]);
    expect(outcome).toMatchObject({
      reason: "conflict",
      detail: `event e-1 of tenant t1 was seen before with another payload (stored ${record.storedFingerprint!.slice(0, 12)}, new ${record.fingerprint!.slice(0, 12)})`,
    });
  });
});

describe("a message without a readable key whose transaction keeps failing", () => {
  it("gets a delayed retry like any other, with no key", async () => {
    const { store, lines, pipeline } = setup({ canDelayRetry: () => true });
    store.script = () => { throw deadlock(); };
    const [outcome] = await pipeline.process([incomingMessage("{broken")]);
    expect(outcome).toEqual({ kind: "delayed", key: null, detail: "failed 3 times: deadlock detected" });
    expect(logged(lines, "transient failures outlived the in-process retries; scheduling a delayed retry")[0]?.fields)
      .toEqual({ handler: "decisions", tenant: undefined, eventId: undefined, error: "deadlock detected" });
  });

  it("is quarantined as retries_exhausted once none is left, keyed by its body", async () => {
    const { store, lines, pipeline } = setup({ canDelayRetry: () => false });
    store.script = (attempt) => { if (attempt <= 3) throw deadlock(); return "commit"; };
    const [outcome] = await pipeline.process([incomingMessage("{broken")]);
    expect(outcome).toMatchObject({ kind: "quarantined", key: null, reason: "retries_exhausted" });
    expect(store.quarantined.map((r) => [r.key, r.reason, r.body.toString()])).toEqual([[null, "retries_exhausted", "{broken"]]);
    expect(logged(lines, "retries exhausted; event quarantined")[0]?.fields).toEqual({ handler: "decisions", tenant: undefined, eventId: undefined, error: "deadlock detected" });
  });
});

describe("quarantine rows", () => {
  it("are written in delivery order, whatever decided them (invalid, conflict, handler's refusal)", async () => {
    const { store, pipeline } = setup({
      handler: {
        name: "decisions",
        handle(event) {
          if (event.event_id === "e-0") return Promise.reject(new PermanentEventError("account_missing", "no account"));
          return Promise.resolve();
        },
      },
    });
    await pipeline.process([message("e-5", { amount: 1 })]);
    // A conflict on e-5, an invalid body, a refusal of e-0 (a key that sorts first), another invalid body.
    const outcomes = await pipeline.process([message("e-5", { amount: 2 }), incomingMessage("{broken"), message("e-0"), incomingMessage("[]")]);
    expect(kinds(outcomes)).toEqual(["quarantined:conflict", "quarantined:invalid", "quarantined:account_missing", "quarantined:invalid"]);
    expect(store.quarantined.map((r) => r.reason)).toEqual(["conflict", "invalid", "account_missing", "invalid"]);
    expect(store.quarantined.map((r) => r.body.toString())).toEqual([JSON.stringify({ tenant: "t1", event_id: "e-5", amount: 2 }), "{broken", JSON.stringify({ tenant: "t1", event_id: "e-0" }), "[]"]);
  });
});
