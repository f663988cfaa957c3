/**
 * Text from messages (bodies, ids, headers, handler reasons) reaches an operator's terminal
 * through the command's tables and the ledger's listings. A terminal ACTS on some characters
 * instead of showing them: ESC starts colour, cursor and title sequences (`ESC [ 31 m`,
 * `ESC ] 0 ; title BEL`), CR rewrites the line, the C1 controls are 8-bit forms of the same
 * sequences, and the bidirectional overrides and isolates reorder what is shown after them. Any
 * producer could write to the screen of whoever inspects its messages. These helpers show such
 * characters as escapes instead.
 */

// The pattern IS a list of control characters: that is the point of it.
// eslint-disable-next-line no-control-regex
const TERMINAL_CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * For human-readable output: every control character but tab and newline as `\xNN` (or `\uNNNN`
 * above U+00FF). `ESC [31m` prints as the six characters `\x1b[31m`.
 */
export function escapeControlCharacters(text: string): string {
  return text.replace(TERMINAL_CONTROLS, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/**
 * For JSON text: JSON.stringify escapes the C0 controls but writes DEL, the C1 controls and the
 * bidirectional controls as they are. They can only stand inside strings, where `\uNNNN` is the
 * same value: the JSON parses to exactly what it did, and a terminal shows it inert.
 */
export function escapeJsonControlCharacters(json: string): string {
  return json.replace(TERMINAL_CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
