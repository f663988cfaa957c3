/**
 * The error catalogue and docs/errors.md say the same, both ways: a code added to the catalogue
 * without its documentation, or documented but not raised by anything, fails here; so does a
 * kind that differs between the two (the kind decides what happens to a delivery, and the doc is
 * what an operator reads to know it). The classes take their codes from the catalogue.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type ErrorCode, errorCatalogue } from "../../src/core/error-catalogue.js";
import {
  BrokerUnreachableError, CommitOutcomeUnknownError, InboxConfigError, type InboxError, InvalidEventError, InvalidPublishError, PermanentEventError,
  QuarantinePublishError, RetryLaterError, StoreUnavailableError, TransientStoreError,
} from "../../src/core/errors.js";
import { type ConsoleErrorCode, ConsoleRequestError } from "../../src/console/console-request-error.js";
import { QuarantineDecisionTakenError, QuarantineOperationError } from "../../src/quarantine/quarantine-errors.js";
import { RetentionGuardError } from "../../src/retention/replay-window.js";
import { markdownTable, unquoted } from "../support/markdown-table.js";

const doc = readFileSync(new URL("../../docs/errors.md", import.meta.url), "utf8");
const documented = markdownTable(doc, "Error codes").map((row) => ({ code: unquoted(row.code!), kind: row.kind!, className: unquoted(row.class!) }));
const catalogued = Object.entries(errorCatalogue).map(([code, entry]) => ({ code, kind: entry.kind }));

describe("docs/errors.md and the error catalogue", () => {
  it("the doc's table is read: one row per code, none twice", () => {
    expect(documented.length).toBeGreaterThanOrEqual(11);
    expect(new Set(documented.map((d) => d.code)).size).toBe(documented.length);
  });

  it("every catalogued code is documented", () => {
    const missing = catalogued.filter((c) => !documented.some((d) => d.code === c.code)).map((c) => c.code);
    expect(missing).toEqual([]);
  });

  it("every documented code is in the catalogue", () => {
    const unknown = documented.filter((d) => !(d.code in errorCatalogue)).map((d) => d.code);
    expect(unknown).toEqual([]);
  });

  it("each code has the same kind in both", () => {
    const byCode = (list: ReadonlyArray<{ code: string; kind: string }>) => Object.fromEntries(list.map((e) => [e.code, e.kind]));
    expect(byCode(documented)).toEqual(byCode(catalogued));
  });

  it("each catalogued code has a one-line meaning", () => {
    for (const [code, entry] of Object.entries(errorCatalogue)) {
      expect(entry.meaning.length, code).toBeGreaterThan(10);
      expect(entry.meaning, code).not.toContain("\n");
    }
  });
});

describe("the error classes take code and kind from the catalogue", () => {
  const made: Array<[string, () => InboxError, ErrorCode]> = [
    ["InvalidEventError", () => new InvalidEventError("m"), "RI_INVALID_EVENT"],
    ["PermanentEventError", () => new PermanentEventError("r", "m"), "RI_PERMANENT_EVENT"],
    ["InvalidPublishError", () => new InvalidPublishError("routingKey", "m"), "RI_INVALID_PUBLISH"],
    ["RetryLaterError", () => new RetryLaterError("r", "m"), "RI_RETRY_LATER"],
    ["TransientStoreError", () => new TransientStoreError("m"), "RI_STORE_TRANSIENT"],
    ["TransientStoreError", () => new TransientStoreError("m", { kind: "connection" }), "RI_STORE_CONNECTION_LOST"],
    ["StoreUnavailableError", () => new StoreUnavailableError("read-only", "m"), "RI_STORE_UNAVAILABLE"],
    ["CommitOutcomeUnknownError", () => new CommitOutcomeUnknownError("m"), "RI_COMMIT_OUTCOME_UNKNOWN"],
    ["QuarantinePublishError", () => new QuarantinePublishError("m"), "RI_QUARANTINE_PUBLISH"],
    ["BrokerUnreachableError", () => new BrokerUnreachableError("m"), "RI_BROKER_UNREACHABLE"],
    ["InboxConfigError", () => new InboxConfigError("m"), "RI_CONFIG"],
    ["RetentionGuardError", () => new RetentionGuardError("m"), "RI_RETENTION_GUARD"],
    ["QuarantineOperationError", () => new QuarantineOperationError("m"), "RI_QUARANTINE_OPERATION"],
    ["QuarantineDecisionTakenError", () => new QuarantineDecisionTakenError("m", "done", null), "RI_QUARANTINE_DECIDED"],
    ["QuarantineOperationError", () => new QuarantineOperationError("m", { code: "RI_QUARANTINE_NOT_FOUND" }), "RI_QUARANTINE_NOT_FOUND"],
    ["QuarantineOperationError", () => new QuarantineOperationError("m", { code: "RI_QUARANTINE_OPTIONS" }), "RI_QUARANTINE_OPTIONS"],
    ...(Object.keys(errorCatalogue).filter((code) => code.startsWith("RI_CONSOLE_")) as ConsoleErrorCode[])
      .map((code): [string, () => InboxError, ErrorCode] => ["ConsoleRequestError", () => new ConsoleRequestError(code, "m"), code]),
  ];

  it.each(made)("%s raises %s... with the catalogue's kind", (className, make, code) => {
    const error = make();
    expect(error.code).toBe(code);
    expect(error.kind).toBe(errorCatalogue[code].kind);
    expect(error.name).toBe(className);
  });

  it("every catalogued code is raised by one of the classes, and the doc names that class", () => {
    expect(new Set(made.map(([, , code]) => code))).toEqual(new Set(Object.keys(errorCatalogue)));
    for (const [className, , code] of made) {
      expect(documented.find((d) => d.code === code)?.className, code).toBe(className);
    }
  });
});
