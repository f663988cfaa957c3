/**
 * The console's route table and where its statuses come from: every route declares a schema for
 * each part of the request it reads, and its path's parameters are exactly the ones its schema
 * reads; a value a schema cannot read is a 400 naming the field, never another failure; the
 * table answers 404 for a path it does not have and 405 for a method a path does not take; a
 * status follows from an error's code alone. A house rule keeps it so: no source of the console
 * or the command decides anything by testing an error's message.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ConsoleRequestError, type ConsoleErrorCode } from "../../src/console/console-request-error.js";
import { CONSOLE_ROUTES } from "../../src/console/console-routes.js";
import { httpStatusOf } from "../../src/console/http-status.js";
import { NOTHING } from "../../src/console/request-schema.js";
import { findRoute, openRoute, paramsOf, route } from "../../src/console/route.js";
import { errorCatalogue } from "../../src/core/error-catalogue.js";
import { QuarantineDecisionTakenError, QuarantineOperationError } from "../../src/quarantine/quarantine-errors.js";
import { checkResolvable } from "../../src/quarantine/resolution-rules.js";
import type { QuarantineDetail } from "../../src/core/store-contract/quarantine-admin.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const caught = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
};

describe("the console's route table", () => {
  it("declares every route once, each with a schema for its parameters, its query and its body", () => {
    expect(CONSOLE_ROUTES.length).toBeGreaterThanOrEqual(30);
    const keys = CONSOLE_ROUTES.map((r) => `${r.method} ${r.path}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const r of CONSOLE_ROUTES) {
      const key = `${r.method} ${r.path}`;
      for (const part of [r.params, r.query, r.body]) {
        expect(typeof part.parse, key).toBe("function");
        expect(Array.isArray(part.names), key).toBe(true);
      }
      expect([...r.params.names].sort(), key).toEqual(paramsOf(r.path).sort());
      // A read takes no body; only the console's own files and the login are open to anyone.
      if (r.method === "GET") expect(r.body, key).toBe(NOTHING);
      if (r.access !== "caller") expect(key).toMatch(/^GET \/(assets\/|favicon\.ico$|login$)|^POST \/login$/);
    }
    // Every change the API and the pages take reads a body schema or acts on its path alone.
    const bodiless = CONSOLE_ROUTES.filter((r) => r.method === "POST" && r.body === NOTHING).map((r) => r.path);
    expect(bodiless.sort()).toEqual(["/api/jobs/:id/cancel", "/jobs/:id/cancel", "/logout"]);
  });

  it("refuses any value a schema cannot read with a 400 that names the field, and nothing else", () => {
    const junk: unknown[] = [{}, [], { a: 1 }, "not a value", -1, 0, 1.5, true, "1e3", "x".repeat(300), "2026-02-30"];
    for (const r of CONSOLE_ROUTES) {
      for (const [part, schema] of [["params", r.params], ["query", r.query], ["body", r.body]] as const) {
        for (const name of schema.names) {
          for (const value of junk) {
            const error = caught(() => schema.parse((n) => (n === name ? value : undefined)));
            if (error === undefined) continue;
            const what = `${r.method} ${r.path} ${part}.${name} = ${JSON.stringify(value)}`;
            expect(error, what).toBeInstanceOf(ConsoleRequestError);
            expect((error as ConsoleRequestError).code, what).toBe("RI_CONSOLE_INVALID_REQUEST");
            // The field at fault: this one, or one a rule between fields needs with it (a reason with acceptNew).
            expect(schema.names, what).toContain((error as ConsoleRequestError).field!.split(".")[0]);
            expect((error as ConsoleRequestError).message, what).toContain((error as ConsoleRequestError).field);
          }
        }
      }
    }
  });

  it("answers a path it does not have 404, a method a path does not take 405 with Allow, HEAD as GET", () => {
    const handle = () => ({ json: null });
    const table = [
      route({ method: "GET", path: "/jobs/:id", handle }),
      route({ method: "GET", path: "/jobs/new", handle }),
      route({ method: "POST", path: "/jobs/:id/cancel", handle }),
      openRoute("public", { method: "GET", path: "/assets/x", handle }),
    ];
    expect(findRoute(table, "GET", "/jobs/7")).toMatchObject({ route: table[0], params: { id: "7" } });
    expect(findRoute(table, "HEAD", "/jobs/7")).toMatchObject({ route: table[0] });
    expect(findRoute(table, "GET", "/jobs/new").route).toBe(table[1]);
    expect(findRoute(table, "GET", "/jobs/").miss).toMatchObject({ code: "RI_CONSOLE_NOT_FOUND" });
    expect(findRoute(table, "GET", "/jobs/7/cancel/x").miss).toMatchObject({ code: "RI_CONSOLE_NOT_FOUND" });
    const wrong = findRoute(table, "GET", "/jobs/7/cancel").miss;
    expect(wrong).toMatchObject({ code: "RI_CONSOLE_METHOD_NOT_ALLOWED", headers: { allow: "POST" } });
    expect(httpStatusOf(wrong)).toBe(405);
    expect(findRoute(table, "DELETE", "/jobs/7").miss).toMatchObject({ headers: { allow: "GET, HEAD" } });
    expect(httpStatusOf(findRoute(table, "GET", "/nope").miss)).toBe(404);
  });
});

describe("HTTP statuses come from error codes", () => {
  it("maps each console code and the quarantine's codes, whatever the message says", () => {
    const expected: Record<ConsoleErrorCode, number> = {
      RI_CONSOLE_INVALID_REQUEST: 400, RI_CONSOLE_UNAUTHENTICATED: 401, RI_CONSOLE_FORBIDDEN: 403, RI_CONSOLE_NOT_FOUND: 404,
      RI_CONSOLE_METHOD_NOT_ALLOWED: 405, RI_CONSOLE_SELECTION_CHANGED: 409, RI_CONSOLE_BODY_TOO_LARGE: 413,
      RI_CONSOLE_UNSUPPORTED_MEDIA_TYPE: 415, RI_CONSOLE_THROTTLED: 429, RI_CONSOLE_NO_BROKER: 503,
    };
    expect(Object.keys(errorCatalogue).filter((c) => c.startsWith("RI_CONSOLE_")).sort()).toEqual(Object.keys(expected).sort());
    for (const [code, status] of Object.entries(expected)) expect(httpStatusOf(new ConsoleRequestError(code as ConsoleErrorCode, "m")), code).toBe(status);

    // The text that used to decide 404 decides nothing: the code does.
    expect(httpStatusOf(new QuarantineOperationError("no quarantine entry #7"))).toBe(409);
    expect(httpStatusOf(new QuarantineOperationError("anything", { code: "RI_QUARANTINE_NOT_FOUND" }))).toBe(404);
    expect(httpStatusOf(new QuarantineOperationError("anything", { code: "RI_QUARANTINE_OPTIONS" }))).toBe(400);
    expect(httpStatusOf(new QuarantineDecisionTakenError("anything", "done", null))).toBe(409);
    // Ours, not the caller's: no code, or a code without a status, is a 500.
    expect(httpStatusOf(new Error("RI_CONSOLE_NOT_FOUND: 404 no page"))).toBe(500);
    expect(httpStatusOf(new RangeError("limit must be a positive integer"))).toBe(500);
    expect(httpStatusOf(Object.assign(new Error("x"), { code: "RI_CONSOLE_NOT_FOUND" }))).toBe(500);
  });

  it("a replay that asks for accept-new and accept-stale at once is refused with a code that answers 400", () => {
    const entry = { id: 3, status: "held", reason: "conflict", fingerprint: "f", storedFingerprint: "s", tenant: "t", eventId: "e", bodyTruncated: false } as QuarantineDetail;
    const error = caught(() => checkResolvable(entry, { action: "replay", actor: "a", reason: "r", acceptNew: true, acceptStale: true }, { latest: null, storedFingerprint: "s" }));
    expect(error).toMatchObject({ code: "RI_QUARANTINE_OPTIONS", message: "choose accept-new or accept-stale, not both" });
    expect(httpStatusOf(error)).toBe(400);
  });
});

describe("house rules of the console and the command", () => {
  const sources = ["src/console", "src/cli"].flatMap((dir) => readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts")).map((e) => relative(root, join(e.parentPath, e.name))));
  /** A regular expression, or a string search, run on an error's message or its description. */
  const messageTest = /\.test\(\s*(?:describeError\(|[\w.?!]*\bmessage\b)|\b(?:message|describeError\([^)]*\))\s*\??\.\s*(?:includes|startsWith|endsWith|match|search)\(/;
  /**
   * A URL parser that throws a plain Error with no code: its message is all there is to tell a
   * bad URL by (an exit code, not an HTTP status).
   */
  const known = ["src/cli/open-database.ts"];

  it("finds what it checks, and would catch the tests it forbids", () => {
    expect(sources).toEqual(expect.arrayContaining(["src/console/console-handler.ts", "src/cli/commands/doctor.ts"]));
    expect(messageTest.test("if (/NOT_FOUND|404/.test(describeError(error))) return null;")).toBe(true);
    expect(messageTest.test("return /^no quarantine entry/.test(error.message) ? 404 : 409;")).toBe(true);
    expect(messageTest.test("if (error.message.includes(\"not found\")) return 404;")).toBe(true);
    expect(messageTest.test("const status = httpStatusOf(error);")).toBe(false);
  });

  it("decide nothing (no HTTP status, no doctor verdict) by testing an error's message", () => {
    const offending = sources.filter((file) => !known.includes(file)).flatMap((file) => readFileSync(join(root, file), "utf8").split("\n")
      .map((line, i) => ({ line, i })).filter(({ line }) => messageTest.test(line)).map(({ line, i }) => `${file}:${i + 1}: ${line.trim()}`));
    expect(offending).toEqual([]);
  });

  it("the console imports nothing from the command", () => {
    const upward = sources.filter((file) => file.startsWith("src/console/") && /from "\.\.\/cli\//.test(readFileSync(join(root, file), "utf8")));
    expect(upward).toEqual([]);
  });
});
