/**
 * Text from messages (bodies, ids, headers, handler reasons) reaches an operator's terminal
 * through the command's tables and the ledger's listings, and their browser through the console.
 * Some characters ACT instead of showing: ESC starts colour, cursor and title sequences
 * (`ESC [ 31 m`, `ESC ] 0 ; title BEL`), CR rewrites the line, the C1 controls are 8-bit forms of
 * the same sequences, and the bidirectional embeddings, overrides and isolates reorder what is
 * shown after them (`evt-<U+202E>gnp.exe` reads "evt-exe.png"). Others hide: zero-width spaces
 * and joiners, the word joiner and the byte-order mark make two different ids look the same.
 * And a decomposed `café` (e + combining acute) looks exactly like the composed one, although
 * the inbox compares ids byte for byte. Any producer could write to the screen of whoever
 * inspects its messages, or pass one id off as another. These helpers show such characters as
 * escapes instead: one place, so the command, the console, the ledger and the logs agree.
 */

// The pattern IS a list of control characters: that is the point of it.
// eslint-disable-next-line no-control-regex
const ACTING_OR_INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/g;
// The same set without the global flag, for a test that keeps no state between calls.
const ONE_ACTING_OR_INVISIBLE = new RegExp(ACTING_OR_INVISIBLE.source);

/** A base character and the combining marks after it (or marks with no base). */
const CLUSTER = /\P{M}\p{M}*|\p{M}+/gsu;
const MARK = /\p{M}/u;

/**
 * Text in Unicode NFC is left as it is (the marks of scripts that need them included). In text
 * that is not, each base-and-marks cluster that NFC would change shows its marks escaped, and a
 * character NFC replaces by another (ANGSTROM SIGN by Å) shows escaped itself: `cafe\u0301`, so
 * an operator sees it is not `café`.
 */
function escapeNonNfc(text: string, escape: (codePoint: number) => string): string {
  if (text.normalize("NFC") === text) return text;
  return text.replace(CLUSTER, (cluster) => {
    if (cluster.normalize("NFC") === cluster) return cluster;
    let out = "";
    for (const c of cluster) {
      const changed = MARK.test(c) || c.normalize("NFC") !== c;
      out += changed ? escape(c.codePointAt(0)!) : c;
    }
    return out;
  });
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");

/** `\xNN` up to U+00FF, `\uNNNN` in the rest of the BMP, `\u{NNNNN}` above. */
function textEscape(codePoint: number): string {
  if (codePoint <= 0xff) return `\\x${hex(codePoint, 2)}`;
  return codePoint <= 0xffff ? `\\u${hex(codePoint, 4)}` : `\\u{${codePoint.toString(16)}}`;
}

/** JSON's own escape: `\uNNNN`, as a surrogate pair above U+FFFF. */
function jsonEscape(codePoint: number): string {
  return String.fromCodePoint(codePoint).split("").map((unit) => `\\u${hex(unit.charCodeAt(0), 4)}`).join("");
}

/**
 * For human-readable output: every control character but tab and newline, every bidirectional
 * and zero-width character, and the marks of text that is not in NFC as `\xNN` (`\uNNNN`,
 * `\u{NNNNN}` above U+00FF). `ESC [31m` prints as the six characters `\x1b[31m`.
 */
export function escapeControlCharacters(text: string): string {
  return escapeNonNfc(text.replace(ACTING_OR_INVISIBLE, (c) => textEscape(c.charCodeAt(0))), textEscape);
}

/**
 * For JSON text: JSON.stringify escapes the C0 controls but writes DEL, the C1 controls, the
 * bidirectional and zero-width characters and decomposed marks as they are. They can only stand
 * inside strings, where `\uNNNN` is the same value: the JSON parses to exactly what it did, and a
 * terminal shows it inert.
 */
export function escapeJsonControlCharacters(json: string): string {
  return escapeNonNfc(json.replace(ACTING_OR_INVISIBLE, (c) => jsonEscape(c.charCodeAt(0))), jsonEscape);
}

/**
 * True when text holds a character these helpers would escape: a control, bidirectional or
 * zero-width character, or a sequence that is not in NFC. Two ids that differ only there look the
 * same on a screen while the inbox, which compares ids byte for byte, keeps them apart.
 */
export function hasDeceptiveCharacters(text: string): boolean {
  return ONE_ACTING_OR_INVISIBLE.test(text) || text.normalize("NFC") !== text;
}
