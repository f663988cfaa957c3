import { describe, expect, it } from "vitest";
import { decodeJsonBody, isJsonContentType } from "../../src/core/decode.js";
import { firstDuplicateKey, flatObjectKeyCount } from "../../src/core/duplicate-keys.js";
import { InvalidEventError } from "../../src/core/errors.js";

const decode = (body: string, contentType = "application/json") => decodeJsonBody(Buffer.from(body, "utf8"), { contentType });

function refusal(body: string, contentType?: string): string {
  try {
    decode(body, contentType);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidEventError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${body} (${contentType})`);
}

describe("content type", () => {
  it.each(["application/json", "Application/JSON; charset=utf-8", "application/cloudevents+json", "application/vnd.acme.event.v2+json", "text/json", "text/plain", "text/plain; charset=utf-8"])(
    "accepts %s", (type) => {
      expect(isJsonContentType(type)).toBe(true);
      expect(decode('{"a":1}', type)).toEqual({ a: 1 });
    });

  it.each(["application/jsonp", "application/x-not-json-really", "application/json-seq", "json", "text/javascript; note=json", "application/xml", "application/octet-stream", "application/+json"])(
    "refuses %s", (type) => {
      expect(isJsonContentType(type)).toBe(false);
      expect(refusal('{"a":1}', type)).toMatch(/content type .* is not JSON/);
    });
});

describe("duplicate keys", () => {
  it.each([
    ['{"delta_cents":1,"delta_cents":1000}', "delta_cents"],
    ['{"a":1,"\\u0061":2}', "a"],
    ['{"x":{"k":1,"k":2}}', "k"],
    ['{"x":[{"k":1},{"k":2,"k":3}]}', "k"],
    ['{"t":"a\\"b","t":"c"}', "t"],
    ['{"q\\"":1,"q\\"":2}', 'q"'],
    // After a nested array or object closes, the outer object's keys are checked again.
    ['{"list":[1,[2]],"x":1,"x":2}', "x"],
    ['{"inner":{"y":1},"x":1,"x":2}', "x"],
  ])("refuses %s", (body, key) => {
    expect(firstDuplicateKey(body)).toBe(key);
    expect(refusal(body)).toContain(`body has the key ${JSON.stringify(key)} twice in one object`);
  });

  it.each([
    ["{}", 0],
    ['{"a":1}', 1],
    ['{ "a" : 1 , "b" : "x" ,\n "c" : null }', 3],
    // Brackets, commas and quotes inside strings are text, keys or values alike.
    ['{"a":"{[,\\"","b,{[":"\\\\"}', 2],
    ['{"a\\"":1,"\\u0061":true}', 2],
    ['{"a":1,"a":1}', 2],
    ['{"a":{"b":1}}', -1],
    ['{"a":[1]}', -1],
    ['{"a":1,"z":[]}', -1],
  ])("counts the keys a flat object spells out: %s has %i", (body, count) => {
    expect(() => JSON.parse(body) as unknown).not.toThrow();
    expect(flatObjectKeyCount(body)).toBe(count);
  });

  it("refuses a flat object whose key repeats with the same value, spelled the same or escaped", () => {
    for (const body of ['{"a":1,"a":1}', '{"b":"x","a":1,"\u0061":1}', '{"a":null,"b":2,"a":null}']) {
      expect(refusal(body), body).toContain('body has the key "a" twice in one object');
    }
  });

  it.each([
    '{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}',
    '{"a":"{\\"a\\":1,\\"a\\":2}","b":"a,a"}',
    '{"a":["a","a"],"b":"\\\\","c":"\\\\\\""}',
    '{ "a" : 1 , "A" : 2 }',
    '{"inner":{"b":1},"b":2}',
    '{"list":[{"b":1}],"b":2}',
  ])("accepts the same name in other objects, in values and in arrays: %s", (body) => {
    expect(firstDuplicateKey(body)).toBeNull();
    expect(() => decode(body)).not.toThrow();
  });
});
