import { InboxConfigError } from "../core/errors.js";

/**
 * A `$1`-style statement taken apart at its placeholders, for data layers whose raw API wants
 * something else (Knex's `?`, Drizzle's `sql` chunks): `texts` has one more element than
 * `values`, and `values[i]` goes between `texts[i]` and `texts[i + 1]`. A placeholder used twice
 * (`$1 ... $1`) yields its value twice. Every value stays a value: the data layer binds it as a
 * parameter, so a misread statement can fail, never carry a value into its text.
 */
export interface PositionalStatement {
  texts: string[];
  values: unknown[];
}

export function toPositional(text: string, values: readonly unknown[]): PositionalStatement {
  const texts: string[] = [];
  const ordered: unknown[] = [];
  let last = 0;
  for (const { start, end, index } of placeholdersOf(text)) {
    if (index < 1 || index > values.length) {
      throw new InboxConfigError(`placeholder ${text.slice(start, end)} has no value (${values.length} given) in: ${text.slice(0, 200)}`);
    }
    texts.push(text.slice(last, start));
    ordered.push(values[index - 1]);
    last = end;
  }
  texts.push(text.slice(last));
  return { texts, values: ordered };
}

interface Placeholder { start: number; end: number; index: number }

/**
 * The inbox sends the same few statement texts over and over: each is read once. Bounded, in
 * case a caller builds texts on the fly.
 */
const placeholdersByText = new Map<string, Placeholder[]>();
const MAX_CACHED_TEXTS = 512;

function placeholdersOf(sql: string): Placeholder[] {
  let found = placeholdersByText.get(sql);
  if (found === undefined) {
    found = readPlaceholders(sql);
    if (placeholdersByText.size >= MAX_CACHED_TEXTS) placeholdersByText.clear();
    placeholdersByText.set(sql, found);
  }
  return found;
}

const IDENTIFIER_START = /[A-Za-z_\u0080-\uffff]/;
const IDENTIFIER_PART = /[A-Za-z0-9_$\u0080-\uffff]/;
const DOLLAR_TAG = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/;
const PLACEHOLDER = /^\$(\d+)/;

/**
 * Where the `$n` placeholders of a PostgreSQL statement are, read the way the server reads it:
 * a `$1` inside a quoted identifier (a schema named `tenant$1`), a string literal ('...', E'...'
 * with backslash escapes), a dollar-quoted body ($$...$$, $tag$...$tag$), a comment (-- and
 * nested slash-star) or an unquoted identifier (which may hold `$`) is text. A statement where
 * one of them does not end cannot be read: refused rather than guessed at.
 */
function readPlaceholders(sql: string): Placeholder[] {
  const found: Placeholder[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === "'") {
      const escapes = i > 0 && (sql[i - 1] === "E" || sql[i - 1] === "e") && !IDENTIFIER_PART.test(sql[i - 2] ?? " ");
      i = endOf(sql, i, endOfQuoted(sql, i, "'", escapes));
    } else if (c === '"') {
      i = endOf(sql, i, endOfQuoted(sql, i, '"', false));
    } else if (c === "-" && sql[i + 1] === "-") {
      const newline = sql.indexOf("\n", i);
      i = newline < 0 ? sql.length : newline + 1;
    } else if (c === "/" && sql[i + 1] === "*") {
      i = endOf(sql, i, endOfBlockComment(sql, i));
    } else if (c === "$") {
      const placeholder = PLACEHOLDER.exec(sql.slice(i, i + 12));
      const tag = placeholder ? null : DOLLAR_TAG.exec(sql.slice(i, i + 64));
      if (placeholder) {
        found.push({ start: i, end: i + placeholder[0].length, index: Number(placeholder[1]) });
        i += placeholder[0].length;
      } else if (tag) {
        const close = sql.indexOf(tag[0], i + tag[0].length);
        i = endOf(sql, i, close < 0 ? -1 : close + tag[0].length);
      } else {
        i++;
      }
    } else if (IDENTIFIER_START.test(c)) {
      i++;
      while (i < sql.length && IDENTIFIER_PART.test(sql[i]!)) i++;
    } else {
      i++;
    }
  }
  return found;
}

/** `end`, or a refusal naming where the quoted run or comment that never ends begins. */
function endOf(sql: string, start: number, end: number): number {
  if (end >= 0) return end;
  throw new InboxConfigError(`statement cannot be read: the quote, dollar quote or comment at character ${start + 1} never ends, in: ${sql.slice(0, 200)}`);
}

/** Index just past the closing quote of a quoted run starting at `open` (doubled quotes stay inside), or -1. */
function endOfQuoted(sql: string, open: number, quote: string, backslashEscapes: boolean): number {
  let i = open + 1;
  while (i < sql.length) {
    const c = sql[i]!;
    if (backslashEscapes && c === "\\") { i += 2; continue; }
    if (c === quote) {
      if (sql[i + 1] === quote) { i += 2; continue; }
      return i + 1;
    }
    i++;
  }
  return -1;
}

/** Index just past a (possibly nested) block comment starting at `open`, or -1. */
function endOfBlockComment(sql: string, open: number): number {
  let depth = 0;
  let i = open;
  while (i < sql.length) {
    if (sql[i] === "/" && sql[i + 1] === "*") { depth++; i += 2; continue; }
    if (sql[i] === "*" && sql[i + 1] === "/") {
      depth--;
      i += 2;
      if (depth === 0) return i;
      continue;
    }
    i++;
  }
  return -1;
}
