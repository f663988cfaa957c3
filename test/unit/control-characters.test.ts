import { describe, expect, it } from "vitest";
import { escapeControlCharacters, escapeJsonControlCharacters } from "../../src/core/control-characters.js";
import { createJsonLogger } from "../../src/core/logger.js";

// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

const hostile: Array<[string, string, string]> = [
  ["colour (CSI)", "a\x1b[31mred\x1b[0m", "a\\x1b[31mred\\x1b[0m"],
  ["window title (OSC ... BEL)", "\x1b]0;title\x07", "\\x1b]0;title\\x07"],
  ["OSC 8 hyperlink ending in ST", "\x1b]8;;http://x\x1b\\link", "\\x1b]8;;http://x\\x1b\\link"],
  ["carriage return rewriting the line", "ok\rFAIL", "ok\\x0dFAIL"],
  ["backspace, NUL, DEL", "a\bb\0c\x7f", "a\\x08b\\x00c\\x7f"],
  ["8-bit CSI and OSC (C1)", "\u009b2J\u009d0;t\u009c", "\\x9b2J\\x9d0;t\\x9c"],
  ["bidi override and isolates", "\u202eevil\u2066x\u2069\u200f", "\\u202eevil\\u2066x\\u2069\\u200f"],
];

describe("escapeControlCharacters", () => {
  it.each(hostile)("%s", (_what, text, shown) => {
    const escaped = escapeControlCharacters(text);
    expect(escaped).toBe(shown);
    expect(RAW_CONTROL.test(escaped)).toBe(false);
  });

  it("keeps tab, newline and ordinary text (accents, emoji, CJK) as they are", () => {
    const text = "a\tb\nçé 😀 漢字 {\"k\":1}";
    expect(escapeControlCharacters(text)).toBe(text);
  });

  it("JSON: the same value after parsing, with no raw control character in the text", () => {
    const value = { body: hostile.map(([, text]) => text).join("|"), id: "e-\u202e1" };
    const json = escapeJsonControlCharacters(JSON.stringify(value));
    expect(RAW_CONTROL.test(json)).toBe(false);
    expect(JSON.parse(json)).toEqual(value);
  });

  it("the JSON logger writes no raw control character", () => {
    const lines: string[] = [];
    createJsonLogger({ write: (l) => lines.push(l) }).warn("quarantined \u009b2J", { eventId: "e-\u202e1\x1b[31m" });
    expect(RAW_CONTROL.test(lines[0]!)).toBe(false);
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: "quarantined \u009b2J", eventId: "e-\u202e1\x1b[31m" });
  });
});
