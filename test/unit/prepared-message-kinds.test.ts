/**
 * An error thrown by a handler's `parse` or `fingerprint` keeps its kind, as one thrown by
 * `handle` does: an InboxConfigError fails the batch (nothing committed, quarantined or delayed:
 * the consumer stops and says why), a RetryLaterError waits in the delayed retries and is
 * quarantined with its own reason only after the last one, a PermanentEventError is quarantined
 * with its reason. Before, all three were quarantined as `invalid` ("parse failed: ..."), which
 * hid a misconfiguration behind innocent events and gave up on events that only had to wait.
 * A parser that crashes with any other error still quarantines the message as `invalid`.
 */
import { describe, expect, it } from "vitest";
import { InboxConfigError, InvalidEventError, PermanentEventError, RetryLaterError } from "../../src/core/errors.js";
import { defaultEventKey } from "../../src/core/event.js";
import type { InboxHandler } from "../../src/core/handler.js";
import { InboxPipeline } from "../../src/core/pipeline.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";
import { incomingMessage } from "../support/messages.js";
import { type LogLine, recordingLogger } from "../support/recording-logger.js";

type Body = { tenant: string; event_id: string; throws?: string };

const thrown: Record<string, () => Error> = {
  config: () => new InboxConfigError("parse needs the schema registry URL"),
  later: () => new RetryLaterError("schema_missing", "schema v7 not known yet"),
  permanent: () => new PermanentEventError("unsupported_version", "version 1 is no longer accepted"),
  invalid: () => new InvalidEventError("amount must be an integer"),
  crash: () => new TypeError("cannot read properties of undefined"),
};

function setup(where: "parse" | "fingerprint", canDelay: boolean) {
  const store = new MemoryStore();
  const lines: LogLine[] = [];
  const pick = (body: Record<string, unknown>) => {
    const which = body.throws as string | undefined;
    if (which) throw thrown[which]!();
  };
  const handler: InboxHandler<Body, MemoryHandle> = {
    name: "kinds",
    parse: (body) => {
      if (where === "parse") pick(body);
      return { key: defaultEventKey(body), event: body as Body };
    },
    fingerprint: (source) => {
      if (where === "fingerprint") pick(source as Record<string, unknown>);
      return JSON.stringify(source);
    },
    handle(event, ctx) {
      ctx.tx.effects.push(event.event_id);
      return Promise.resolve();
    },
  };
  const pipeline = new InboxPipeline<Body, MemoryHandle>({ store, handler, logger: recordingLogger(lines), canDelayRetry: () => canDelay });
  return { store, pipeline, lines };
}

const message = (eventId: string, throws?: string) => incomingMessage({ tenant: "t1", event_id: eventId, ...(throws ? { throws } : {}) });

describe.each(["parse", "fingerprint"] as const)("an error thrown by %s", (where) => {
  it("InboxConfigError: process() rejects with it; nothing of the batch is committed, quarantined or delayed", async () => {
    for (const ahead of [false, true]) {
      const { store, pipeline } = setup(where, true);
      const batch = [message("e-1"), message("e-2", "config"), message("e-3")];
      if (ahead) for (const m of batch) pipeline.prepareAhead(m);
      await expect(pipeline.process(batch)).rejects.toThrow(new InboxConfigError("parse needs the schema registry URL"));
      expect(store.transactions).toBe(0);
      expect(store.quarantined).toEqual([]);
      expect(store.effects).toEqual([]);
    }
  });

  it("RetryLaterError: delayed while a delayed retry is left, with nothing written; the rest applies", async () => {
    const { store, pipeline } = setup(where, true);
    const outcomes = await pipeline.process([message("e-1"), message("e-2", "later"), message("e-3")]);
    expect(outcomes.map((o) => o.kind)).toEqual(["applied", "delayed", "applied"]);
    expect(outcomes[1]).toMatchObject({ detail: "schema_missing: schema v7 not known yet" });
    expect(store.quarantined).toEqual([]);
    expect(store.effects).toEqual(["e-1", "e-3"]);
  });

  it("RetryLaterError with no delayed retry left: quarantined with its own reason, saying the waiting is over", async () => {
    const { store, pipeline } = setup(where, false);
    const [outcome] = await pipeline.process([message("e-2", "later")]);
    expect(outcome).toMatchObject({ kind: "quarantined", reason: "schema_missing", detail: "schema v7 not known yet (still refused with no delayed retry left)" });
    expect(store.quarantined.map((r) => r.reason)).toEqual(["schema_missing"]);
  });

  it.each([
    ["permanent", "unsupported_version", "version 1 is no longer accepted"],
    ["invalid", "invalid", "amount must be an integer"],
    ["crash", "invalid", `${where} failed: cannot read properties of undefined`],
  ])("%s: quarantined at once as %s", async (which, reason, detail) => {
    const { store, pipeline } = setup(where, true);
    const outcomes = await pipeline.process([message("e-1"), message("e-2", which), message("e-3")]);
    expect(outcomes.map((o) => o.kind)).toEqual(["applied", "quarantined", "applied"]);
    expect(outcomes[1]).toMatchObject({ reason, detail });
    expect(store.quarantined.map((r) => [r.reason, r.key?.eventId])).toEqual([[reason, "e-2"]]);
  });
});
