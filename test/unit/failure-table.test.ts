/**
 * The failure table: what a failed transaction attempt leads to, by error kind and situation.
 * It is the one place that decides it, so it must answer every situation exactly once, and
 * docs/failure-modes.md must show the same table (an operator reads the doc, the pipeline the code).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type ErrorKind, errorCatalogue } from "../../src/core/error-catalogue.js";
import { InboxConfigError } from "../../src/core/errors.js";
import { type FailureRow, type FailureSituation, decideFailure, failureTable } from "../../src/core/failure-table.js";
import { markdownTable } from "../support/markdown-table.js";

const KINDS: readonly ErrorKind[] = ["permanent", "retry-later", "transient", "connection", "commit-unknown", "config"];

/** Every situation a failed attempt can be in, as plain facts. */
const situations = [1, 3].flatMap((messages) => [true, false].flatMap((retriesLeft) => [true, false].flatMap((delayed) => [true, false].map((refusable) => ({
  messages, retriesLeft, delayed, refusable,
})))));
type Facts = (typeof situations)[number];

const situation = (facts: Facts): FailureSituation => ({ ...facts, delayedRetry: () => facts.delayed });

function matches(row: FailureRow, kind: ErrorKind, f: Facts): boolean {
  return row.kind === kind
    && (row.messages === "any" || row.messages === (f.messages > 1 ? "several" : "one"))
    && (row.retries === "any" || row.retries === (f.retriesLeft ? "left" : "exhausted"))
    && (row.delayedRetry === "any" || row.delayedRetry === (f.delayed ? "available" : "none left"))
    && (row.refusable === "any" || row.refusable === (f.refusable ? "yes" : "no"));
}

describe("the failure table", () => {
  it("knows every error kind the catalogue uses", () => {
    for (const entry of Object.values(errorCatalogue)) expect(KINDS).toContain(entry.kind);
    expect(new Set(failureTable.map((r) => r.kind))).toEqual(new Set(KINDS));
  });

  it.each(KINDS)("%s: every situation is answered by exactly one row", (kind) => {
    for (const facts of situations) {
      expect(failureTable.filter((row) => matches(row, kind, facts)), JSON.stringify(facts)).toHaveLength(1);
    }
  });

  it("config fails loudly in every situation: never retried, split, delayed, quarantined or requeued", () => {
    for (const facts of situations) expect(decideFailure("config", situation(facts))).toBe("fail");
  });

  it("no other kind fails loudly", () => {
    for (const kind of KINDS.filter((k) => k !== "config")) {
      for (const facts of situations) expect(decideFailure(kind, situation(facts))).not.toBe("fail");
    }
  });

  it("commit-unknown is requeued at once, whatever the situation: it may have committed, so it is never retried or quarantined", () => {
    for (const facts of situations) expect(decideFailure("commit-unknown", situation(facts))).toBe("requeue");
  });

  it("connection: retried while in-process retries are left, then requeued; never delayed, split or quarantined", () => {
    for (const facts of situations) expect(decideFailure("connection", situation(facts))).toBe(facts.retriesLeft ? "retry" : "requeue");
  });

  it("transient: retried while retries are left; then a batch is split, a lone message delayed, or quarantined once no delayed retry is left", () => {
    for (const facts of situations) {
      const expected = facts.retriesLeft ? "retry" : facts.messages > 1 ? "isolate" : facts.delayed ? "delay" : "quarantine";
      expect(decideFailure("transient", situation(facts)), JSON.stringify(facts)).toBe(expected);
    }
  });

  it.each(["permanent", "retry-later"] as const)("%s: never retried in process; a batch is split, a lone event set aside, or quarantined when it cannot be", (kind) => {
    for (const facts of situations) {
      const expected = facts.messages > 1 ? "isolate" : facts.refusable ? "set-aside" : "quarantine";
      expect(decideFailure(kind, situation(facts)), JSON.stringify(facts)).toBe(expected);
    }
  });

  it("asks whether a delayed retry is available only when that decides, and at most once", () => {
    let asked = 0;
    const ask = (answer: boolean): FailureSituation["delayedRetry"] => () => { asked++; return answer; };
    expect(decideFailure("transient", { messages: 1, retriesLeft: true, refusable: true, delayedRetry: ask(true) })).toBe("retry");
    expect(decideFailure("transient", { messages: 2, retriesLeft: false, refusable: false, delayedRetry: ask(true) })).toBe("isolate");
    expect(decideFailure("connection", { messages: 1, retriesLeft: false, refusable: true, delayedRetry: ask(true) })).toBe("requeue");
    expect(decideFailure("retry-later", { messages: 1, retriesLeft: false, refusable: true, delayedRetry: ask(true) })).toBe("set-aside");
    expect(asked).toBe(0);
    expect(decideFailure("transient", { messages: 1, retriesLeft: false, refusable: true, delayedRetry: ask(false) })).toBe("quarantine");
    expect(asked).toBe(1);
  });

  it("a kind it does not know (a user's own InboxError with a kind of its own) is taken as transient", () => {
    for (const facts of situations) {
      expect(decideFailure("surprise" as ErrorKind, situation(facts))).toBe(decideFailure("transient", situation(facts)));
    }
  });

  it("a table without a row for the situation is a configuration error, never a silent default", () => {
    const partial: FailureRow[] = [{ kind: "transient", messages: "any", retries: "left", delayedRetry: "any", refusable: "any", action: "retry" }];
    expect(() => decideFailure("transient", { messages: 1, retriesLeft: false, refusable: true, delayedRetry: () => true }, partial)).toThrow(InboxConfigError);
  });
});

describe("docs/failure-modes.md shows the same table", () => {
  const doc = readFileSync(new URL("../../docs/failure-modes.md", import.meta.url), "utf8");
  const documented = markdownTable(doc, "What a failed transaction leads to").map((row) => ({
    kind: row["error kind"], messages: row.messages, retries: row["in-process retries"],
    delayedRetry: row["delayed retry"], refusable: row.refusable, action: row.action,
  }));

  it("row for row, in the same order", () => {
    expect(documented).toEqual(failureTable.map((row) => ({ ...row })));
  });
});
