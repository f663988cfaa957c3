import type { PgStatement } from "./pg-query.js";
import type { PreparedStatements } from "./prepared-statements.js";
import type { PgClient, PgQueryResult } from "./postgres-store.js";

/**
 * One transaction on a pooled pg client whose BEGIN travels with its first statement: node-
 * postgres sends one query per round trip, so a separate BEGIN costs a round trip and a socket
 * write per transaction (in strict mode, one in four). When the first statement is the inbox's
 * own (a claim, a redelivery count) and its parameters are plain text, it is sent as the simple
 * query `BEGIN; <statement with its parameters as quoted literals>`. Anything else (a Buffer, a
 * NUL, the user's own SQL through `handle`) first sends a plain BEGIN, queued by pg ahead of it.
 * With a `PreparedStatements` registry, a named first statement that the client has already
 * prepared goes as `BEGIN; EXECUTE "name"(<literals>)` instead: no parse and plan per transaction.
 */
export class DeferredBegin<C extends PgClient> {
  private begun = false;
  private begin: Promise<unknown> | undefined;

  constructor(private readonly client: C, private readonly statements?: PreparedStatements) {}

  /** The client for the handler: BEGIN is queued before anything it sends. */
  get handle(): C {
    this.ensureBegun();
    return this.client;
  }

  /** True once BEGIN has been sent (nothing to commit or roll back otherwise). */
  get started(): boolean {
    return this.begun;
  }

  async query(statement: PgStatement): Promise<PgQueryResult> {
    if (!this.begun && statement.name && this.statements?.enabled) return this.firstNamed(statement, statement.name, this.statements);
    if (!this.begun) {
      const inlined = inlineParameters(statement);
      if (inlined !== null) {
        this.begun = true;
        const results = (await this.client.query(`BEGIN;${inlined}`)) as unknown as PgQueryResult[];
        return results[1]!;
      }
      this.ensureBegun();
    }
    if (this.begin) await this.begin;
    return this.client.query(statement);
  }

  /**
   * The transaction's first statement, named: `BEGIN; EXECUTE` when the client has prepared it,
   * else BEGIN on its own and the statement with its parameters, which node-postgres prepares.
   */
  private async firstNamed(statement: PgStatement, name: string, statements: PreparedStatements): Promise<PgQueryResult> {
    const execute = statements.has(this.client, name) ? executeStatement(name, statement.values) : null;
    if (execute !== null) {
      this.begun = true;
      try {
        const results = (await this.client.query(`BEGIN;${execute}`)) as unknown as PgQueryResult[];
        return results[1]!;
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code !== "26000") throw error;
        // The server does not know the name (a pooler renamed it, DISCARD ALL): start again the
        // usual way, and stop using EXECUTE.
        statements.disable();
        await this.client.query("ROLLBACK");
        this.begun = false;
      }
    }
    this.ensureBegun();
    await this.begin;
    const result = await this.client.query(statement);
    statements.add(this.client, name);
    return result;
  }

  /**
   * `SAVEPOINT <name>; <statement>` as one simple query (after `BEGIN;` if nothing was sent yet),
   * or as two round trips when the statement's parameters cannot be inlined.
   */
  async queryInSavepoint(savepoint: string, statement: PgStatement): Promise<PgQueryResult> {
    const inlined = inlineParameters(statement);
    if (inlined === null) {
      await this.query({ text: `SAVEPOINT ${savepoint}`, values: [] });
      return this.query(statement);
    }
    const begin = this.begun ? "" : "BEGIN;";
    this.begun = true;
    if (this.begin) await this.begin;
    const results = (await this.client.query(`${begin}SAVEPOINT ${savepoint};${inlined}`)) as unknown as PgQueryResult[];
    return results[results.length - 1]!;
  }

  /** Waits for a BEGIN sent on its own, so that its failure surfaces before COMMIT. */
  async settled(): Promise<void> {
    if (this.begin) await this.begin;
  }

  private ensureBegun(): void {
    if (this.begun) return;
    this.begun = true;
    this.begin = this.client.query("BEGIN");
    // Awaited by the next statement or by settled(); a failure also fails those.
    this.begin.catch(() => undefined);
  }
}

/**
 * The statement with its `$n` parameters replaced by quoted literals, or null when a parameter is
 * not plain text (a string, a finite number, null, or an array of strings) or holds a NUL, or
 * when the text cannot be read (an unterminated quote or comment). Quoting follows
 * node-postgres's escapeLiteral: quotes doubled, and `E'...'` with doubled backslashes when the
 * text holds a backslash, which reads the same whatever standard_conforming_strings says.
 *
 * Only real parameters are replaced: a `$2` inside a quoted identifier (a schema named
 * `inbox$2`), a string literal, a dollar-quoted body, a comment or an unquoted identifier is
 * text, and stays as it is. Replacing it would put a value from a message into the SQL text.
 */
export function inlineParameters(statement: PgStatement): string | null {
  const literals = literalsOf(statement.values);
  if (literals === null) return null;
  const parameters = cachedParameterPositions(statement.text);
  if (parameters === null) return null;
  let text = "";
  let from = 0;
  for (const { start, end, index } of parameters) {
    const literal = literals[index - 1];
    if (literal === undefined) return null;
    text += statement.text.slice(from, start) + literal;
    from = end;
  }
  return text + statement.text.slice(from);
}

interface ParameterPosition { start: number; end: number; index: number }

/**
 * The inbox sends the same few statement texts in every transaction: each is read once. Bounded,
 * in case a caller builds texts on the fly.
 */
const positionsByText = new Map<string, ParameterPosition[] | null>();
const MAX_CACHED_TEXTS = 512;

function cachedParameterPositions(sql: string): ParameterPosition[] | null {
  let positions = positionsByText.get(sql);
  if (positions === undefined) {
    positions = parameterPositions(sql);
    if (positionsByText.size >= MAX_CACHED_TEXTS) positionsByText.clear();
    positionsByText.set(sql, positions);
  }
  return positions;
}

const IDENTIFIER_START = /[A-Za-z_\u0080-\uffff]/;
const IDENTIFIER_PART = /[A-Za-z0-9_$\u0080-\uffff]/;
const DOLLAR_TAG = /^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/;

/**
 * Where the `$n` parameters of a PostgreSQL statement are, read the way the server's lexer reads
 * it: string literals ('...', E'...' with backslash escapes), quoted identifiers ("..."),
 * dollar-quoted text ($$...$$, $tag$...$tag$), comments (-- and nested slash-star) and unquoted
 * identifiers (which may hold `$`) are skipped. Null when one of them does not end.
 */
function parameterPositions(sql: string): ParameterPosition[] | null {
  const found: ParameterPosition[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === "'") {
      const escapes = i > 0 && (sql[i - 1] === "E" || sql[i - 1] === "e") && !IDENTIFIER_PART.test(sql[i - 2] ?? " ");
      const end = endOfQuoted(sql, i, "'", escapes);
      if (end < 0) return null;
      i = end;
    } else if (c === '"') {
      const end = endOfQuoted(sql, i, '"', false);
      if (end < 0) return null;
      i = end;
    } else if (c === "-" && sql[i + 1] === "-") {
      const newline = sql.indexOf("\n", i);
      i = newline < 0 ? sql.length : newline + 1;
    } else if (c === "/" && sql[i + 1] === "*") {
      const end = endOfBlockComment(sql, i);
      if (end < 0) return null;
      i = end;
    } else if (c === "$") {
      const digits = /^\$(\d+)/.exec(sql.slice(i, i + 12));
      if (digits) {
        found.push({ start: i, end: i + digits[0].length, index: Number(digits[1]) });
        i += digits[0].length;
        continue;
      }
      const tag = DOLLAR_TAG.exec(sql.slice(i, i + 64));
      if (!tag) { i++; continue; }
      const close = sql.indexOf(tag[0], i + tag[0].length);
      if (close < 0) return null;
      i = close + tag[0].length;
    } else if (IDENTIFIER_START.test(c)) {
      i++;
      while (i < sql.length && IDENTIFIER_PART.test(sql[i]!)) i++;
    } else if (/[0-9]/.test(c)) {
      // A number, so that `1$2`-like text is never mistaken for a parameter after it.
      while (i < sql.length && /[0-9.eE]/.test(sql[i]!)) i++;
    } else {
      i++;
    }
  }
  return found;
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

/** Characters an element of an array literal must escape inside its double quotes. */
const ARRAY_ELEMENT_SPECIAL = /[\\"]/;

/** `EXECUTE "name"(<literals>)`, or null when a parameter cannot be inlined. */
function executeStatement(name: string, values: readonly unknown[]): string | null {
  const literals = literalsOf(values);
  if (literals === null) return null;
  const quoted = `"${name.replace(/"/g, '""')}"`;
  return literals.length > 0 ? `EXECUTE ${quoted}(${literals.join(", ")})` : `EXECUTE ${quoted}`;
}

/** Every parameter as a quoted literal, or null when one cannot be inlined. */
function literalsOf(values: readonly unknown[]): string[] | null {
  const literals: string[] = [];
  for (const value of values) {
    const literal = literalOf(value);
    if (literal === null) return null;
    literals.push(literal);
  }
  return literals;
}

function literalOf(value: unknown): string | null {
  if (value === null) return "NULL";
  // Quoted, as the text node-postgres would send for it, typed by its context like a parameter.
  // Bare, a negative number changes the statement: `5-$1` with -1 reads `5--1`, the rest of the
  // line a comment, and `-1::text` casts 1 before negating it.
  if (typeof value === "number") return Number.isFinite(value) ? `'${String(value)}'` : null;
  if (typeof value === "string") return value.includes("\u0000") ? null : quoteLiteral(value);
  if (Array.isArray(value) && value.every((v) => typeof v === "string" && !v.includes("\u0000"))) {
    const strings = value as string[];
    if (strings.length === 0) return "'{}'";
    // Ids rarely hold a quote or a backslash: then one check replaces a replace() per element.
    const plain = !ARRAY_ELEMENT_SPECIAL.test(strings.join(""));
    const elements = plain ? strings : strings.map((v) => v.replace(/[\\"]/g, (c) => `\\${c}`));
    return quoteLiteral(`{"${elements.join('","')}"}`);
  }
  return null;
}

function quoteLiteral(text: string): string {
  const quoted = `'${text.replace(/'/g, "''").replace(/\\/g, "\\\\")}'`;
  return text.includes("\\") ? `E${quoted}` : quoted;
}
