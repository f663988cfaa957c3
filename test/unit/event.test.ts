import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidEventError } from "../../src/core/errors.js";
import { MAX_ID_LENGTH, defaultEventKey, eventKeyString, readId } from "../../src/core/event.js";

function readIdError(body: Record<string, unknown>, field: string): InvalidEventError {
  try {
    readId(body, field);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidEventError);
    return error as InvalidEventError;
  }
  throw new Error(`readId accepted ${JSON.stringify(body[field])}`);
}

describe("readId", () => {
  it("returns a valid id unchanged", () => {
    for (const id of ["e-1", "a", "2024-01-01T00:00:00Z#42", "événement", "事件-😀", "with inner  spaces", "x".repeat(MAX_ID_LENGTH)]) {
      expect(readId({ event_id: id }, "event_id")).toBe(id);
    }
  });

  it("accepts 256 characters and rejects 257", () => {
    expect(MAX_ID_LENGTH).toBe(256);
    expect(readId({ id: "x".repeat(256) }, "id")).toHaveLength(256);
    expect(readIdError({ id: "x".repeat(257) }, "id").message).toBe("id is longer than 256 characters");
  });

  it("rejects a missing field or a value that is not a string, naming the field and the type", () => {
    const cases: Array<[unknown, string]> = [[undefined, "undefined"], [null, "null"], [42, "number"], [true, "boolean"], [{}, "object"], [["e-1"], "object"]];
    for (const [value, type] of cases) {
      expect(readIdError({ event_id: value }, "event_id").message).toBe(`event_id must be a string, got ${type}`);
    }
    expect(readIdError({}, "tenant").message).toBe("tenant must be a string, got undefined");
  });

  it("rejects an empty id", () => {
    expect(readIdError({ tenant: "" }, "tenant").message).toBe("tenant must not be empty");
  });

  it("rejects control characters", () => {
    for (const id of ["a\nb", "a\tb", "\u0000", "a\u001f", "a\u007f", "\r"]) {
      expect(readIdError({ event_id: id }, "event_id").message).toMatch(/control characters|leading or trailing spaces/);
    }
    expect(readIdError({ event_id: "a\u0007b" }, "event_id").message).toBe("event_id contains control characters");
  });

  it("names an unpaired surrogate as such, not as a space or control character", () => {
    expect(readIdError({ event_id: "e-\ud800" }, "event_id").message).toBe("event_id contains an unpaired UTF-16 surrogate");
    expect(readIdError({ tenant: "\udc00t" }, "tenant").message).toBe("tenant contains an unpaired UTF-16 surrogate");
  });

  it("rejects leading or trailing spaces (a PAD SPACE collation would merge `e-1` and `e-1 `)", () => {
    for (const id of [" e-1", "e-1 ", "\u00a0e-1", "e-1\u3000", " "]) {
      expect(readIdError({ event_id: id }, "event_id").message).toMatch(/event_id (has leading or trailing spaces|must not be empty)/);
    }
  });

  it("accepts exactly the ids without control characters, outer white space or unpaired surrogates (any UTF-16 text)", () => {
    const unit = fc.oneof(fc.constantFrom("\u0000", "\u001f", "\u007f", " ", "\u00a0", "\u2028", "\ufeff", "\u3000", "\ud800", "\udfff", "\ud83d\ude00", "\t"), fc.string({ unit: "binary", maxLength: 1 }));
    fc.assert(
      fc.property(fc.array(unit, { minLength: 1, maxLength: 8 }).map((parts) => parts.join("")), (id) => {
        // eslint-disable-next-line no-control-regex
        const valid = id.length <= MAX_ID_LENGTH && id.trim() === id && !/[\u0000-\u001f\u007f]/.test(id) && !/\p{Cs}/u.test(id) && id.length > 0;
        if (valid) expect(readId({ id }, "id")).toBe(id);
        else expect(readIdError({ id }, "id").message).toMatch(/^id (contains control characters|has leading or trailing spaces|contains an unpaired UTF-16 surrogate|must not be empty)$/);
      }),
      { numRuns: 2000 },
    );
  });

  it("accepts every non-empty printable string of at most 256 characters without outer spaces", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", minLength: 1, maxLength: 64 }), (id) => {
        // eslint-disable-next-line no-control-regex
        fc.pre(id.length <= MAX_ID_LENGTH && id.trim() === id && !/[\u0000-\u001f\u007f]/.test(id));
        expect(readId({ id }, "id")).toBe(id);
      }),
    );
  });
});

describe("defaultEventKey", () => {
  it("reads tenant and event_id", () => {
    expect(defaultEventKey({ tenant: "t1", event_id: "e-1", type: "x" })).toEqual({ tenant: "t1", eventId: "e-1" });
  });

  it("never falls back to another field (the business id, not a delivery id)", () => {
    expect(() => defaultEventKey({ tenant: "t1", id: "e-1", message_id: "m-1" })).toThrow("event_id must be a string, got undefined");
    expect(() => defaultEventKey({ event_id: "e-1" })).toThrow("tenant must be a string, got undefined");
    expect(() => defaultEventKey({ tenant: "t1", event_id: 7 })).toThrow(InvalidEventError);
  });
});

describe("eventKeyString", () => {
  it("is injective: two different keys never print the same", () => {
    expect(eventKeyString({ tenant: "a", eventId: "b|c" })).not.toBe(eventKeyString({ tenant: "a|b", eventId: "c" }));
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), fc.string(), (t1, e1, t2, e2) => {
        fc.pre(t1 !== t2 || e1 !== e2);
        expect(eventKeyString({ tenant: t1, eventId: e1 })).not.toBe(eventKeyString({ tenant: t2, eventId: e2 }));
      }),
    );
  });
});
