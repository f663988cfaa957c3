import { escapeControlCharacters } from "../core/control-characters.js";
import { canonicalJson } from "../core/fingerprint.js";

const MAX_LINES = 1500;

/**
 * A payload as lines: canonical JSON (sorted keys), indented; text as it is. Control characters
 * come out escaped here, before the columns are measured, so that a side-by-side view lines up.
 */
export function payloadLines(payload: { json: true; value: unknown } | { json: false; text: string } | null): string[] {
  if (payload === null) return [];
  if (!payload.json) return payload.text.split("\n").map(escapeControlCharacters);
  return JSON.stringify(JSON.parse(canonicalJson(payload.value)), null, 2).split("\n").map(escapeControlCharacters);
}

/**
 * Two texts in two columns, aligned on their common lines (longest common subsequence):
 * `|` marks a changed line, `<` a line only on the left, `>` only on the right.
 */
export function sideBySide(left: readonly string[], right: readonly string[], width: number, titles: [string, string]): string[] {
  const col = Math.max(20, Math.floor((width - 3) / 2));
  const fit = (text: string) => (text.length > col ? `${text.slice(0, col - 1)}…` : text.padEnd(col));
  const out = [`${fit(titles[0])}   ${titles[1]}`.trimEnd(), `${"-".repeat(col)}   ${"-".repeat(col)}`];
  for (const [l, mark, r] of alignLines(left, right)) out.push(`${fit(l ?? "")} ${mark} ${r ?? ""}`.trimEnd());
  return out;
}

/** One aligned line pair: left, the mark (`|` changed, `<` left only, `>` right only), right. */
export type AlignedRow = [string | undefined, " " | "|" | "<" | ">", string | undefined];
type Row = AlignedRow;

/** Two texts aligned on their common lines; shared by the terminal view and the console's web page. */
export function alignLines(a: readonly string[], b: readonly string[]): Row[] {
  if (a.length > MAX_LINES || b.length > MAX_LINES) {
    // Too long for a quadratic alignment: pair the lines as they come.
    return Array.from({ length: Math.max(a.length, b.length) }, (_, i): Row => [a[i], a[i] === b[i] ? " " : "|", b[i]]);
  }
  const n = a.length;
  const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    }
  }
  const rows: Row[] = [];
  let i = 0;
  let j = 0;
  const pendingLeft: string[] = [];
  const pendingRight: string[] = [];
  const flush = () => {
    // A run of removed lines next to a run of added lines reads best as changed lines.
    for (let k = 0; k < Math.max(pendingLeft.length, pendingRight.length); k++) {
      const l = pendingLeft[k];
      const r = pendingRight[k];
      rows.push([l, l !== undefined && r !== undefined ? "|" : l !== undefined ? "<" : ">", r]);
    }
    pendingLeft.length = 0;
    pendingRight.length = 0;
  };
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      flush();
      rows.push([a[i], " ", b[j]]);
      i++;
      j++;
    } else if (j >= m || (i < n && lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) {
      pendingLeft.push(a[i++]!);
    } else {
      pendingRight.push(b[j++]!);
    }
  }
  flush();
  return rows;
}
