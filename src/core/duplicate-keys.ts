/**
 * The first key that appears twice in one object of a JSON text, or null. `JSON.parse` keeps
 * the last value silently; other parsers keep the first or refuse. A body such as
 * `{"delta_cents":1,"delta_cents":1000}` would then mean one thing to this consumer and another
 * to an auditor or a downstream service reading the same bytes, so the decoder refuses it.
 *
 * Runs on text `JSON.parse` has accepted, so it only has to find strings and brackets. Keys are
 * compared after unescaping (`"a"` and `"\u0061"` are the same key).
 */
export function firstDuplicateKey(json: string): string | null {
  // One entry per open bracket: the keys of an object so far, or null for an array.
  const open: Array<Set<string> | null> = [];
  let expectKey = false;
  const structural = /["{}[\],]/g;
  for (let match = structural.exec(json); match; match = structural.exec(json)) {
    const at = match.index;
    switch (json[at]) {
      case '"': {
        const end = endOfString(json, at);
        const keys = open[open.length - 1];
        if (expectKey && keys) {
          const raw = json.slice(at + 1, end);
          const key = raw.includes("\\") ? (JSON.parse(`"${raw}"`) as string) : raw;
          if (keys.has(key)) return key;
          keys.add(key);
          expectKey = false;
        }
        structural.lastIndex = end + 1;
        break;
      }
      case "{":
        open.push(new Set());
        expectKey = true;
        break;
      case "[":
        open.push(null);
        expectKey = false;
        break;
      case "}":
      case "]":
        open.pop();
        expectKey = false;
        break;
      case ",":
        expectKey = open[open.length - 1] instanceof Set;
        break;
    }
  }
  return null;
}

const QUOTE = 34;
const OPEN_OBJECT = 123;
const OPEN_ARRAY = 91;
const COMMA = 44;

/**
 * How many keys the text of a flat object spells out (the strings that follow its `{` or a
 * `,`), or -1 when it nests an object or an array. Runs on text `JSON.parse` has accepted as
 * an object. `JSON.parse` keeps one property per distinct key, so a flat object has a key twice
 * exactly when this count exceeds its number of properties: the usual event is cleared by one
 * pass over its characters, with nothing allocated, and only a mismatch needs firstDuplicateKey.
 */
export function flatObjectKeyCount(json: string): number {
  let keys = 0;
  let last = 0;
  for (let at = 0; at < json.length; at++) {
    const c = json.charCodeAt(at);
    if (c === QUOTE) {
      if (last === OPEN_OBJECT || last === COMMA) keys++;
      last = QUOTE;
      at = endOfString(json, at);
    } else if (c === OPEN_OBJECT) {
      if (last !== 0) return -1;
      last = c;
    } else if (c === OPEN_ARRAY) {
      return -1;
    } else if (c === COMMA) {
      last = c;
    }
  }
  return keys;
}

/** Index of the quote closing the string that opens at `start` (a quote after an odd run of backslashes is escaped). */
function endOfString(json: string, start: number): number {
  let end = json.indexOf('"', start + 1);
  for (;;) {
    let backslashes = 0;
    while (json[end - 1 - backslashes] === "\\") backslashes++;
    if (backslashes % 2 === 0) return end;
    end = json.indexOf('"', end + 1);
  }
}
