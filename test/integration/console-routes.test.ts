/**
 * The console's route table over a real database: an unknown route is a 404, a known path asked
 * with another method a 405 that names the methods it takes, a parameter or body field the
 * console cannot read a 400 naming it (before anything is recorded or published), and a replay
 * that asks for accept-new and accept-stale at once a 400, not a 409. Every error carries its
 * catalogue code. Routing does not depend on the database: those run on the first selected one;
 * the accept-new/accept-stale refusal runs on each.
 */
import { describe, expect, it } from "vitest";
import type { ReplayMessage } from "../../src/quarantine/replay.js";
import { TEST_TOKEN, startConsole } from "../support/console-server.js";
import { type RetentionFixture, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES, type TestDatabaseKind } from "../support/test-databases.js";

const bearer = { authorization: `Bearer ${TEST_TOKEN}` };
const post = (body: unknown) => ({ method: "POST", headers: { "content-type": "application/json", ...bearer }, body: JSON.stringify(body) });

/** A conflict (c-1) and two invalid bodies, and a console whose replays are recorded instead of published. */
async function seededConsole(kind: TestDatabaseKind) {
  const f: RetentionFixture = await retentionFixture(kind);
  const p = f.pipeline();
  await p.process([delivery(event("c-1", { n: 1 }))]);
  await p.process([delivery(event("c-1", { n: 2 }))]);
  for (const i of [1, 2]) await p.process([delivery(`{broken ${i}` as unknown as object)]);
  const published: ReplayMessage[] = [];
  const c = await startConsole({ store: f.store, token: TEST_TOKEN, publish: (message) => { published.push(message); return Promise.resolve(); } });
  const [conflict] = await f.ops.listQuarantineEntries({ reason: "conflict" });
  const [invalid] = await f.ops.listQuarantineEntries({ reason: "invalid" });
  return { f, c, published, conflict: conflict!, invalid: invalid! };
}

describe("the console's route table", () => {
  it("answers an unknown route 404 and a known path asked with another method 405, with the methods it takes", async () => {
    const { c, invalid } = await seededConsole(TEST_DATABASES[0]!);
    const { cookie } = await c.login(TEST_TOKEN);

    for (const path of ["/api/nope", "/api/quarantine/1/nope", "/api", "/api/"]) {
      const r = await c.call(path, { headers: bearer });
      expect(r.status, path).toBe(404);
      expect(await r.json(), path).toMatchObject({ code: "RI_CONSOLE_NOT_FOUND", error: expect.stringContaining(path) });
    }
    const page = await c.call("/nope", { headers: { cookie } });
    expect(page.status).toBe(404);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);

    for (const [method, path, allow] of [
      ["GET", `/api/quarantine/${invalid.id}/discard`, "POST"],
      ["POST", "/api/quarantine", "GET, HEAD"],
      ["DELETE", "/api/groups", "GET, HEAD"],
      ["PUT", `/api/jobs/some-job/cancel`, "POST"],
    ] as const) {
      const r = await c.call(path, { method, headers: { ...bearer, "content-type": "application/json" }, ...(method === "GET" ? {} : { body: "{}" }) });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.get("allow"), `${method} ${path}`).toBe(allow);
      expect(await r.json(), `${method} ${path}`).toMatchObject({ code: "RI_CONSOLE_METHOD_NOT_ALLOWED" });
    }
    for (const [method, path] of [["PUT", "/entries"], ["GET", "/logout"], ["DELETE", `/entries/${invalid.id}`]] as const) {
      const r = await c.call(path, { method, headers: { cookie } });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.get("content-type"), `${method} ${path}`).toMatch(/^text\/html/);
    }
    // A page's HEAD is its GET without the body.
    expect((await c.call("/entries", { method: "HEAD", headers: { cookie } })).status).toBe(200);
    // Without credentials a route's existence is not told: 401 (a login for pages), as for a known one.
    expect((await c.call("/api/nope")).status).toBe(401);
    expect((await c.call(`/api/quarantine/${invalid.id}/discard`)).status).toBe(401);
    expect((await c.call("/nope")).headers.get("location")).toBe("/login");
  });

  it("answers a parameter or body field it cannot read 400, naming it, before anything is done", async () => {
    const { f, c, published, conflict, invalid } = await seededConsole(TEST_DATABASES[0]!);
    const refused = async (path: string, init: RequestInit, field: string, message: RegExp) => {
      const r = await c.call(path, init);
      expect(r.status, path).toBe(400);
      expect(await r.json(), path).toEqual({ code: "RI_CONSOLE_INVALID_REQUEST", field, error: expect.stringMatching(message) });
    };
    const get = { headers: bearer };
    await refused("/api/quarantine/abc", get, "id", /^id must be a positive integer, not "abc"/);
    await refused("/api/quarantine/0/diff", get, "id", /^id must be a positive integer/);
    await refused("/api/quarantine?status=gone", get, "status", /^status must be held, replayed, discarded or all/);
    await refused("/api/groups?limit=9999", get, "limit", /^limit is at most 500/);
    await refused("/api/quarantine?since=yesterday", get, "since", /^since takes an ISO time/);
    await refused("/api/audit?before=x", get, "before", /^before must be a positive integer/);

    await refused(`/api/quarantine/${conflict.id}/replay`, post({ reason: "x", acceptNew: "maybe" }), "acceptNew", /^acceptNew must be true or false/);
    await refused(`/api/quarantine/${conflict.id}/replay`, post({ acceptNew: true }), "reason", /reason/);
    await refused(`/api/quarantine/${invalid.id}/discard`, post({ reason: { text: "x" } }), "reason", /^reason must be text/);
    await refused(`/api/quarantine/${invalid.id}/discard`, post({}), "reason", /^say why \(reason\)/);
    // A filter that is not an object would select every held entry if it were ignored.
    await refused("/api/bulk/discard", post({ filter: "reason=invalid", dryRun: true }), "filter", /^filter must be an object/);
    await refused("/api/bulk/discard", post({ filter: { since: "yesterday" }, dryRun: true }), "filter.since", /^filter\.since takes an ISO time/);
    await refused("/api/bulk/discard", post({ filter: { reason: "invalid" }, reason: "x", expected: "two" }), "expected", /^expected must be a positive integer/);
    await refused("/api/bulk/discard", post({ filter: { reason: "invalid" }, reason: "x" }), "expected", /^a bulk action needs expected/);
    await refused("/api/bulk/replay", post({ filter: { reason: "invalid" }, reason: "x", expected: 2, limit: 1.5 }), "limit", /^limit must be a positive integer/);
    await refused("/api/bulk/replay", post({ filter: { reason: "invalid" }, reason: "x", expected: 2, ratePerSecond: -1 }), "ratePerSecond", /^ratePerSecond must be a positive number/);

    // The body itself: JSON that does not parse, or is not an object; too large; neither JSON nor a form.
    const raw = (body: string, type = "application/json") => c.call(`/api/quarantine/${invalid.id}/discard`, { method: "POST", headers: { ...bearer, "content-type": type }, body });
    await refused(`/api/quarantine/${invalid.id}/discard`, { method: "POST", headers: { ...bearer, "content-type": "application/json" }, body: "{reason" }, "body", /^the body is not valid JSON/);
    await refused(`/api/quarantine/${invalid.id}/discard`, { method: "POST", headers: { ...bearer, "content-type": "application/json" }, body: "[1]" }, "body", /^the body must be a JSON object/);
    const large = await raw(JSON.stringify({ reason: "x".repeat(70_000) }));
    expect(large.status).toBe(413);
    expect(await large.json()).toMatchObject({ code: "RI_CONSOLE_BODY_TOO_LARGE" });
    const plain = await raw("reason: x", "text/plain");
    expect(plain.status).toBe(415);
    expect(await plain.json()).toMatchObject({ code: "RI_CONSOLE_UNSUPPORTED_MEDIA_TYPE" });

    expect(await f.ops.auditLog()).toEqual([]);
    expect(published).toEqual([]);
    expect((await f.ops.listQuarantineEntries()).every((e) => e.status === "held")).toBe(true);
  });

  it("gives every refusal its code: 401, 403, 404 for an entry, 409, 503", async () => {
    const { f, c, invalid } = await seededConsole(TEST_DATABASES[0]!);
    const codeOf = async (r: Response) => [r.status, ((await r.json()) as { code?: string }).code];
    expect(await codeOf(await c.call("/api/quarantine"))).toEqual([401, "RI_CONSOLE_UNAUTHENTICATED"]);
    const { cookie } = await c.login(TEST_TOKEN);
    expect(await codeOf(await c.call(`/api/quarantine/${invalid.id}/discard`, { method: "POST", headers: { cookie, "content-type": "application/json" }, body: "{}" })))
      .toEqual([403, "RI_CONSOLE_FORBIDDEN"]);
    expect(await codeOf(await c.call("/api/quarantine/999999", { headers: bearer }))).toEqual([404, "RI_QUARANTINE_NOT_FOUND"]);
    expect(await codeOf(await c.call("/api/quarantine/999999/replay", post({ reason: "x" })))).toEqual([404, "RI_QUARANTINE_NOT_FOUND"]);
    expect(await codeOf(await c.call("/api/jobs/nope", { headers: bearer }))).toEqual([404, "RI_CONSOLE_NOT_FOUND"]);
    expect(await codeOf(await c.call(`/api/quarantine/${invalid.id}/diff`, { headers: bearer }))).toEqual([409, "RI_QUARANTINE_OPERATION"]);
    expect(await codeOf(await c.call("/api/bulk/discard", post({ filter: { reason: "invalid" }, reason: "x", expected: 5 })))).toEqual([409, "RI_CONSOLE_SELECTION_CHANGED"]);
    expect(await codeOf(await c.call(`/api/quarantine/${invalid.id}/discard`, post({ reason: "x" })))).toEqual([200, undefined]);
    expect(await codeOf(await c.call(`/api/quarantine/${invalid.id}/discard`, post({ reason: "again" })))).toEqual([409, "RI_QUARANTINE_DECIDED"]);
    const noBroker = await startConsole({ store: f.store, token: TEST_TOKEN });
    expect(await codeOf(await noBroker.call(`/api/quarantine/${invalid.id}/replay`, post({ reason: "x" })))).toEqual([503, "RI_CONSOLE_NO_BROKER"]);
  });
});

describe.each(TEST_DATABASES)("a replay with accept-new and accept-stale on %s", (kind) => {
  it("is a 400 (the request contradicts itself) from the API and the page, and nothing is recorded or published", async () => {
    const { f, c, published, conflict } = await seededConsole(kind);
    const api = await c.call(`/api/quarantine/${conflict.id}/replay`, post({ reason: "both", acceptNew: true, acceptStale: true }));
    expect(api.status).toBe(400);
    expect(await api.json()).toMatchObject({ code: "RI_CONSOLE_INVALID_REQUEST", field: "acceptStale", error: expect.stringMatching(/acceptNew or acceptStale, not both/) });

    const { cookie, csrf } = await c.login(TEST_TOKEN);
    const form = await c.call(`/entries/${conflict.id}/replay`, {
      method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: new URLSearchParams({ _csrf: csrf, reason: "both", acceptNew: "true", acceptStale: "true" }).toString(),
    });
    expect(form.status).toBe(400);
    expect(await form.text()).toMatch(/acceptNew or acceptStale, not both/);

    expect(await f.ops.quarantineAudit(conflict.id)).toEqual([]);
    expect(published).toEqual([]);
    expect((await f.ops.getQuarantineEntry(conflict.id))?.status).toBe("held");
  });
});
