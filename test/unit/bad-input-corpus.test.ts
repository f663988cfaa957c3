import { describe, expect, it } from "vitest";
import { InvalidEventError } from "../../src/index.js";
import { decodeJsonBody } from "../../src/core/decode.js";
import { parseLedgerEvent } from "../../examples/ledger/events.js";
import { badInputCorpus, validControls } from "../corpus/bad-input-corpus.js";

const decodeAndParse = (c: { body: Buffer; contentType?: string; contentEncoding?: string }) =>
  parseLedgerEvent(decodeJsonBody(c.body, { contentType: c.contentType === undefined ? "application/json" : c.contentType || undefined, contentEncoding: c.contentEncoding }));

describe("bad-input corpus, decoded and validated without I/O", () => {
  const corpus = badInputCorpus();

  it("has at least 200 distinct cases", () => {
    expect(corpus.length).toBeGreaterThanOrEqual(200);
  });

  it.each(corpus.map((c) => [c.name, c] as const))("rejects %s as invalid with a readable detail", (_name, c) => {
    let error: unknown;
    try {
      decodeAndParse(c);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidEventError);
    const message = (error as Error).message;
    expect(message.length).toBeGreaterThan(5);
    expect(message.length).toBeLessThan(400); // never echoes a huge body back
  });

  it.each(validControls().map((c) => [c.name, c] as const))("accepts the control %s", (_name, c) => {
    const parsed = decodeAndParse(c);
    expect(parsed.event.type).toBe("balance.adjusted");
    expect(parsed.event.type === "balance.adjusted" && parsed.event.deltaCents).toBe(c.deltaCents);
  });
});
