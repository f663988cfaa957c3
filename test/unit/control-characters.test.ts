import { describe, expect, it } from "vitest";
import { escapeControlCharacters, escapeJsonControlCharacters } from "../../src/core/control-characters.js";
import { createJsonLogger } from "../../src/core/logger.js";

// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/;

const hostile: Array<[string, string, string]> = [
  ["colour (CSI)", "a\x1b[31mred\x1b[0m", "a\\x1b[31mred\\x1b[0m"],
  ["window title (OSC ... BEL)", "\x1b]0;title\x07", "\\x1b]0;title\\x07"],
  ["OSC 8 hyperlink ending in ST", "\x1b]8;;http://x\x1b\\link", "\\x1b]8;;http://x\\x1b\\link"],
  ["carriage return rewriting the line", "ok\rFAIL", "ok\\x0dFAIL"],
  ["backspace, NUL, DEL", "a\bb\0c\x7f", "a\\x08b\\x00c\\x7f"],
  ["8-bit CSI and OSC (C1)", "\u009b2J\u009d0;t\u009c", "\\x9b2J\\x9d0;t\\x9c"],
  ["bidi override and isolates", "\u202eevil\u2066x\u2069\u200f", "\\u202eevil\\u2066x\\u2069\\u200f"],
  ["an id that reads as another file name", "evt-\u202Egnp.exe", "evt-\\u202egnp.exe"],
  ["every bidi embedding, override and isolate", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", "\\u202a\\u202b\\u202c\\u202d\\u2066\\u2067\\u2068\\u2069"],
  ["zero-width space, joiners, word joiner, BOM", "a\u200bb\u200cc\u200dd\u2060e\ufefff", "a\\u200bb\\u200cc\\u200dd\\u2060e\\ufefff"],
  ["a look-alike id: café decomposed (NFD)", "cafe\u0301", "cafe\\u0301"],
  ["a base and two marks that NFC composes into one character", "a\u0323\u0302", "a\\u0323\\u0302"],
  ["a singleton that NFC replaces (ANGSTROM SIGN)", "\u212b", "\\u212b"],
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

  it("keeps combining marks of text already in NFC (scripts that need them), and tells NFC and NFD apart", () => {
    for (const text of ["नमस्ते", "ที่นี่", "q\u0303", "é\u0301", "Ελληνικά"]) {
      expect(text.normalize("NFC"), text).toBe(text);
      expect(escapeControlCharacters(text)).toBe(text);
    }
    const nfc = "café";
    const nfd = nfc.normalize("NFD");
    expect(escapeControlCharacters(nfc)).toBe("café");
    expect(escapeControlCharacters(nfd)).toBe("cafe\\u0301");
    expect(escapeControlCharacters(nfd)).not.toBe(escapeControlCharacters(nfc));
  });

  it("writes a code point above U+FFFF as \\u{...}", () => {
    // Not NFC: the acute composes with the a across the tremolo mark (a lower combining class).
    expect(escapeControlCharacters("a\u0301\u{1d167}")).toBe("a\\u0301\\u{1d167}");
  });

  it("JSON: the same value after parsing, with no raw control character in the text", () => {
    const value = { body: hostile.map(([, text]) => text).join("|"), id: "e-\u202e1", nfd: "cafe\u0301", astral: "a\u0301\u{1d167}" };
    const json = escapeJsonControlCharacters(JSON.stringify(value));
    expect(RAW_CONTROL.test(json)).toBe(false);
    expect(json).toContain("cafe\\u0301");
    expect(json).toContain("a\\u0301\\ud834\\udd67");
    expect(JSON.parse(json)).toEqual(value);
  });

  it("the JSON logger writes no raw control character", () => {
    const lines: string[] = [];
    createJsonLogger({ write: (l) => lines.push(l) }).warn("quarantined \u009b2J", { eventId: "e-\u202e1\x1b[31m", account: "a\u200bb", tenant: "cafe\u0301" });
    expect(RAW_CONTROL.test(lines[0]!)).toBe(false);
    expect(lines[0]).toContain('"cafe\\u0301"');
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: "quarantined \u009b2J", eventId: "e-\u202e1\x1b[31m", account: "a\u200bb", tenant: "cafe\u0301" });
  });
});
