/**
 * The operator console's JSON API and pages over a real PostgreSQL schema, MariaDB database and
 * SQLite file: authentication (401), CSRF and Origin checks, listing with filters and keyset
 * paging, the conflict diff, bulk actions with their dry run, the audit log, the outbox and
 * retention panels, and escaping of producer-controlled text.
 */
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import express from "express";
import Fastify from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { type ConsoleOptions, createConsoleHandler } from "../../src/operations.js";
import { deleteQueues, drainQueue, withChannel, amqpUrl } from "../support/broker.js";
import { TEST_TOKEN, startConsole } from "../support/console-server.js";
import { outboxTableAt } from "../support/outbox.js";
import { type RetentionFixture, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES, type TestDatabaseKind } from "../support/test-databases.js";
import { AUDIT_KEYS, BULK_KEYS, GROUP_KEYS, keysOf } from "../support/quarantine-json-keys.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** Two conflicts (one carrying a script tag), three invalid bodies and one account_missing-like failure in tenant t2. */
async function seed(f: RetentionFixture, queue = "retention.events"): Promise<void> {
  const p = f.pipeline();
  await p.process([delivery(event("c-1", { n: 1 }), { queue })]);
  await p.process([delivery(event("c-1", { n: 2 }), { queue })]);
  await p.process([delivery(event("c-2", { n: 1 }), { queue })]);
  await p.process([delivery(event("c-2", { n: 1, note: "<script>window.__pwned = 1</script>" }), { queue })]);
  for (const i of [1, 2, 3]) await p.process([delivery(`{broken ${i}` as unknown as object, { queue })]);
}

/** A fresh database of `kind` holding the seeded quarantine. */
async function seeded(kind: TestDatabaseKind): Promise<RetentionFixture> {
  const f = await retentionFixture(kind);
  await seed(f);
  return f;
}

/** The seeded database and a console over it. */
async function seededConsole(kind: TestDatabaseKind, options: Omit<Parameters<typeof startConsole>[0], "store"> = { token: TEST_TOKEN }) {
  const f = await seeded(kind);
  return { f, c: await startConsole({ store: f.store, ...options }) };
}

const json = (r: Response) => r.json() as Promise<Record<string, unknown>>;
const bearer = { authorization: `Bearer ${TEST_TOKEN}` };
const post = (body: unknown, headers: Record<string, string> = {}) => ({ method: "POST", headers: { "content-type": "application/json", ...bearer, ...headers }, body: JSON.stringify(body) });

describe.each(TEST_DATABASES)("console API on %s", (kind) => {
  it("needs the token: 401 without it or with a wrong one, a login redirect for pages; the cookie is a session id, HttpOnly and SameSite=Strict", async () => {
    const { f, c } = await seededConsole(kind);

    for (const headers of [{} as Record<string, string>, { authorization: "Bearer wrong-token" }, { authorization: `Basic ${Buffer.from(`x:${TEST_TOKEN}`).toString("base64")}` }]) {
      const r = await c.call("/api/quarantine", { headers });
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect(JSON.stringify(await json(r))).not.toContain("c-1");
    }
    expect((await c.call("/api/bulk/discard", post({ reason: "x", expected: 5 }, { authorization: "Bearer nope" }))).status).toBe(401);
    expect((await f.ops.listQuarantineEntries()).every((e) => e.status === "held")).toBe(true);
    const page = await c.call("/");
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe("/login");

    const wrong = await c.call("/login", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "token=guess&name=mallory" });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("set-cookie")).toBeNull();

    const login = await c.call("/login", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ token: TEST_TOKEN, name: "alice" }).toString() });
    expect(login.status).toBe(303);
    const cookie = login.headers.get("set-cookie")!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).not.toContain(TEST_TOKEN);
    const listed = await c.call("/api/quarantine", { headers: { cookie: cookie.split(";")[0]! } });
    expect(listed.status).toBe(200);
    // The icon, like the stylesheet, needs no login: a browser asks for it on the login page too.
    const page1 = await (await c.call("/", { headers: { cookie: cookie.split(";")[0]! } })).text();
    expect(page1).toContain('<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">');
    for (const path of ["/assets/favicon.svg", "/favicon.ico"]) {
      const icon = await c.call(path);
      expect(icon.status, path).toBe(200);
      expect(icon.headers.get("content-type"), path).toBe("image/svg+xml");
      expect(await icon.text(), path).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    }
    expect((await c.call("/api/quarantine", { headers: bearer })).status).toBe(200);
  });

  it("refuses state changes without the session's CSRF token or from another origin, and audits the actor of those it does", async () => {
    const { f, c } = await seededConsole(kind);
    const { cookie, csrf } = await c.login(TEST_TOKEN, "alice");
    const [invalid] = await f.ops.listQuarantineEntries({ reason: "invalid" });
    const discard = (headers: Record<string, string>) => c.call(`/api/quarantine/${invalid!.id}/discard`, {
      method: "POST", headers: { "content-type": "application/json", cookie, ...headers }, body: JSON.stringify({ reason: "test garbage" }),
    });
    expect((await discard({})).status).toBe(403);
    expect((await discard({ "x-csrf-token": "forged" })).status).toBe(403);
    expect((await discard({ "x-csrf-token": csrf, origin: "https://evil.example" })).status).toBe(403);
    const form = await c.call(`/entries/${invalid!.id}/discard`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", cookie }, body: "reason=forged" });
    expect(form.status).toBe(403);
    // A change asked with GET is refused as such (405), never run.
    expect(await c.call(`/api/quarantine/${invalid!.id}/discard`, { method: "GET", headers: { cookie } }).then((r) => r.status)).toBe(405);
    expect((await f.ops.getQuarantineEntry(invalid!.id))?.status).toBe("held");
    expect(await f.ops.quarantineAudit(invalid!.id)).toEqual([]);

    const done = await discard({ "x-csrf-token": csrf, origin: c.url });
    expect(done.status).toBe(200);
    expect((await f.ops.getQuarantineEntry(invalid!.id))?.status).toBe("discarded");
    const [audit] = await f.ops.quarantineAudit(invalid!.id);
    expect(audit).toMatchObject({ action: "discard", actor: "console:alice", reason: "test garbage" });

    // The page form with its hidden field works too.
    const [second] = await f.ops.listQuarantineEntries({ reason: "invalid" });
    const viaForm = await c.call(`/entries/${second!.id}/discard`, {
      method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", cookie }, body: new URLSearchParams({ _csrf: csrf, reason: "from the page" }).toString(),
    });
    expect(viaForm.status).toBe(303);
    expect((await f.ops.quarantineAudit(second!.id))[0]).toMatchObject({ actor: "console:alice", reason: "from the page" });
  });

  it("lists with filters and keyset paging, shows one entry, diffs a conflict, groups by cause", async () => {
    const { c } = await seededConsole(kind);
    const get = async (path: string) => { const r = await c.call(path, { headers: bearer }); expect(r.status, path).toBe(200); return json(r); };
    type Listed = { entries: Array<{ id: number; reason: string; event_id: string | null }>; next_after: number | null };

    const all = (await get("/api/quarantine")) as Listed;
    expect(all.entries.map((e) => e.reason)).toEqual(["conflict", "conflict", "invalid", "invalid", "invalid"]);
    const page1 = (await get("/api/quarantine?limit=2")) as Listed;
    expect(page1.entries.map((e) => e.id)).toEqual(all.entries.slice(0, 2).map((e) => e.id));
    const page2 = (await get(`/api/quarantine?limit=2&after=${page1.next_after}`)) as Listed;
    expect(page2.entries.map((e) => e.id)).toEqual(all.entries.slice(2, 4).map((e) => e.id));
    const page3 = (await get(`/api/quarantine?limit=2&after=${page2.next_after}`)) as Listed;
    expect(page3.entries.map((e) => e.id)).toEqual([all.entries[4]!.id]);
    expect(page3.next_after).toBeNull();
    expect(((await get("/api/quarantine?reason=conflict&tenant=t1")) as Listed).entries.map((e) => e.event_id)).toEqual(["c-1", "c-2"]);
    expect(((await get("/api/quarantine?tenant=t2")) as Listed).entries).toEqual([]);
    expect(((await get("/api/quarantine?status=discarded")) as Listed).entries).toEqual([]);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    const past = new Date(Date.now() - 3_600_000).toISOString();
    expect(((await get(`/api/quarantine?since=${future}`)) as Listed).entries).toEqual([]);
    expect(((await get(`/api/quarantine?until=${past}`)) as Listed).entries).toEqual([]);
    expect(((await get(`/api/quarantine?since=${past}&until=${future}`)) as Listed).entries).toHaveLength(5);
    expect(((await get("/api/quarantine?text=NOT%20VALID%20json")) as Listed).entries.map((e) => e.reason)).toEqual(["invalid", "invalid", "invalid"]);
    expect((await c.call("/api/quarantine?since=yesterday", { headers: bearer })).status).toBe(400);
    // Values the database would refuse are refused first, naming the parameter: never a 500 with the database's text.
    for (const [path, message] of [
      ["/api/quarantine?since=99999999d", /^since "99999999d" is out of range: times run from 0001-01-01/],
      ["/api/groups?until=99999999d", /^until "99999999d" is out of range/],
      ["/api/audit?limit=-1", /^limit must be a positive integer, not "-1"/],
      ["/api/audit?limit=0", /^limit must be a positive integer, not "0"/],
      ["/api/audit?limit=abc", /^limit must be a positive integer, not "abc"/],
      ["/api/audit?limit=501", /^limit is at most 500/],
      ["/api/audit?before=-3", /^before must be a positive integer, not "-3"/],
      ["/api/audit?before=1e3", /^before must be a positive integer, not "1e3"/],
    ] as const) {
      const r = await c.call(path, { headers: bearer });
      expect(r.status, path).toBe(400);
      expect((await json(r)).error, path).toMatch(message);
    }
    const { cookie } = await c.login(TEST_TOKEN);
    for (const path of ["/entries?since=99999999d", "/audit?before=-1", "/?until=99999999d"]) {
      const r = await c.call(path, { headers: { cookie } });
      expect(r.status, path).toBe(400);
      expect(await r.text(), path).not.toMatch(/internal error|PostgreSQL|out of range: "/);
    }
    // Times read as the command's flags read them: a duration ago, and the same refusals.
    expect(((await get("/api/quarantine?since=1h")) as Listed).entries).toHaveLength(5);
    expect(((await get("/api/quarantine?until=1h")) as Listed).entries).toEqual([]);
    const reversed = await c.call("/api/quarantine?since=1h&until=2h", { headers: bearer });
    expect(reversed.status).toBe(400);
    expect(await reversed.text()).toMatch(/since \(.*\) must be before until/);

    const conflict = all.entries[0]!;
    const shown = await get(`/api/quarantine/${conflict.id}`);
    expect(shown).toMatchObject({ id: conflict.id, reason: "conflict", body: event("c-1", { n: 2 }), audit: [] });
    const diff = await get(`/api/quarantine/${conflict.id}/diff`);
    expect(diff).toMatchObject({ new: { payload: event("c-1", { n: 2 }) }, stored: { payload: null } });
    expect((await c.call(`/api/quarantine/${all.entries[2]!.id}/diff`, { headers: bearer })).status).toBe(409);
    expect((await c.call("/api/quarantine/999999", { headers: bearer })).status).toBe(404);

    const groups = (await get("/api/groups")).groups as Array<{ key: string; reason: string; entries: number }>;
    expect(groups.map((g) => [g.reason, g.entries])).toEqual([["invalid", 3], ["conflict", 2]]);
    expect(groups.map(keysOf)).toEqual([GROUP_KEYS, GROUP_KEYS]);
    const inGroup = (await get(`/api/quarantine?group=${groups[0]!.key}`)) as Listed;
    expect(inGroup.entries.map((e) => e.reason)).toEqual(["invalid", "invalid", "invalid"]);

    // The script tag in a payload is text on the page, and no page allows inline script.
    const pageResponse = await c.call(`/entries/${all.entries[1]!.id}`, { headers: { cookie: (await c.login(TEST_TOKEN)).cookie } });
    const text = await pageResponse.text();
    expect(pageResponse.headers.get("content-security-policy")).toMatch(/script-src 'self'/);
    expect(pageResponse.headers.get("content-security-policy")).not.toMatch(/unsafe-inline/);
    expect(text).toContain("&lt;script&gt;window.__pwned = 1&lt;/script&gt;");
    expect(text).not.toContain("<script>window");
  });

  it("bulk discard: a dry run counts by reason, a real run needs the confirmed count, and every entry gets its audit record", async () => {
    const { f, c } = await seededConsole(kind);
    const dry = await json(await c.call("/api/bulk/discard", post({ filter: { reason: "invalid" }, dryRun: true })));
    expect(dry).toMatchObject({ dry_run: true, selected: 3, by_reason: { invalid: 3 }, done: 3, skipped: [], failed: [] });
    expect(keysOf(dry)).toEqual(BULK_KEYS);
    expect(await f.ops.auditLog()).toEqual([]);
    expect((await c.call("/api/bulk/discard", post({ filter: { reason: "invalid" }, reason: "garbage" }))).status).toBe(400);
    const stale = await c.call("/api/bulk/discard", post({ filter: { reason: "invalid" }, reason: "garbage", expected: 2 }));
    expect(stale.status).toBe(409);
    expect(await f.ops.auditLog()).toEqual([]);
    const run = await json(await c.call("/api/bulk/discard", post({ filter: { reason: "invalid" }, reason: "garbage", expected: 3 }, { "x-console-actor": "bob" })));
    expect(run).toMatchObject({ dry_run: false, selected: 3, done: 3, skipped: [], failed: [] });
    const log = await json(await c.call("/api/audit?limit=2", { headers: bearer }));
    const audit = log.audit as Array<{ id: number; action: string; actor: string }>;
    expect(audit.map((a) => [a.action, a.actor])).toEqual([["discard", "console:bob"], ["discard", "console:bob"]]);
    expect(audit.map(keysOf)).toEqual([AUDIT_KEYS, AUDIT_KEYS]);
    expect(audit[0]!.id).toBeGreaterThan(audit[1]!.id);
    const older = await json(await c.call(`/api/audit?limit=2&before=${String(log.next_before)}`, { headers: bearer }));
    expect((older.audit as unknown[]).length).toBe(1);
    expect((await f.ops.listQuarantineEntries({ reason: "invalid" })).length).toBe(0);
    expect((await f.ops.listQuarantineEntries({ reason: "conflict" })).length).toBe(2);
  });

  it("replays one entry and a group through the broker with confirms; conflicts need accept-new", async () => {
    const f = await retentionFixture(kind);
    const queue = `ri.test.console.${randomBytes(4).toString("hex")}`;
    cleanups.push(() => deleteQueues(queue));
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    await seed(f, queue);
    const c = await startConsole({ store: f.store, token: TEST_TOKEN, amqpUrl });
    const [invalid] = await f.ops.listQuarantineEntries({ reason: "invalid" });
    const one = await c.call(`/api/quarantine/${invalid!.id}/replay`, post({ reason: "retry" }));
    expect(one.status).toBe(200);
    const bulk = await json(await c.call("/api/bulk/replay", post({ filter: { status: "held" }, reason: "after the fix", expected: 4 })));
    expect(bulk).toMatchObject({ selected: 4, done: 2, failed: [] });
    expect((bulk.skipped as Array<{ why: string }>).map((s) => s.why)).toEqual([expect.stringMatching(/conflict/), expect.stringMatching(/conflict/)]);
    expect(await drainQueue(queue)).toHaveLength(3);
    expect((await f.ops.listQuarantineEntries()).map((e) => e.reason)).toEqual(["conflict", "conflict"]);
    expect((await f.ops.auditLog()).every((a) => a.publishedAt !== null && a.actor === "console:api")).toBe(true);
  });

  it("a bulk replay in the background reports its progress, and a cancel stops it between two entries", async () => {
    const f = await retentionFixture(kind);
    const queue = `ri.test.console.${randomBytes(4).toString("hex")}`;
    cleanups.push(() => deleteQueues(queue));
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    await seed(f, queue);
    const c = await startConsole({ store: f.store, token: TEST_TOKEN, amqpUrl });
    type Job = { id: string; finished_at: string | null; progress: { selected: number; done: number }; stopped: string | null };
    const job = async (id: string) => (await json(await c.call(`/api/jobs/${id}`, { headers: bearer }))) as unknown as Job;
    const finished = async (id: string) => { for (;;) { const j = await job(id); if (j.finished_at) return j; await new Promise((r) => setTimeout(r, 50)); } };

    const started = await c.call("/api/bulk/replay", post({ filter: { reason: "invalid" }, reason: "slowly", expected: 3, ratePerSecond: 2, background: true }));
    expect(started.status).toBe(202);
    const { id } = (await started.json()) as Job;
    expect((await c.call(`/api/jobs/${id}/cancel`, post({}))).status).toBe(200);
    const cancelled = await finished(id);
    expect(cancelled.stopped).toBe("aborted");
    expect(cancelled.progress.done).toBeLessThan(3);
    expect((await f.ops.auditLog()).length).toBe(cancelled.progress.done);
    expect(await drainQueue(queue)).toHaveLength(cancelled.progress.done);

    const rest = 3 - cancelled.progress.done;
    const again = (await json(await c.call("/api/bulk/replay", post({ filter: { reason: "invalid" }, reason: "the rest", expected: rest, background: true })))) as unknown as Job;
    expect(await finished(again.id)).toMatchObject({ stopped: null, progress: { selected: rest, done: rest } });
    expect(await drainQueue(queue)).toHaveLength(rest);
    expect((await c.call("/api/jobs/nope", { headers: bearer })).status).toBe(404);
  });

  it("shows the outbox backlog and the dedup table with its retention horizon", async () => {
    const { f, c } = await seededConsole(kind, { token: TEST_TOKEN, replayWindowMs: 14 * 86_400_000 });
    expect(await json(await c.call("/api/outbox", { headers: bearer }))).toMatchObject({ pending: 0, failing: 0, oldest_pending_at: null, worst: null });
    const ago = (ms: number) => (kind === "postgres" ? `now() - interval '${ms} milliseconds'` : kind === "mysql" ? `UTC_TIMESTAMP(6) - INTERVAL ${ms * 1000} MICROSECOND` : String(Date.now() - ms));
    await outboxTableAt(f.url).exec(`INSERT INTO rabbit_inbox_outbox (message_id, exchange, routing_key, body, properties, created_at, available_at, attempts, last_error)
       VALUES ('m1', 'ex', 'acct', ${kind === "postgres" ? "'\\x00'::bytea" : "X'00'"}, '{}', ${ago(600_000)}, ${ago(600_000)}, 2, 'unroutable: no queue bound')`);
    const outbox = await json(await c.call("/api/outbox", { headers: bearer }));
    expect(outbox).toMatchObject({ pending: 1, failing: 1, unroutable: 1, worst: { exchange: "ex", routing_key: "acct", attempts: 2 } });
    expect(outbox.failing_rows).toEqual([expect.objectContaining({ exchange: "ex", routing_key: "acct", attempts: 2, last_error: "unroutable: no queue bound" })]);
    expect(Date.now() - new Date((outbox.failing_rows as Array<{ created_at: string }>)[0]!.created_at).getTime()).toBeGreaterThan(590_000);
    expect(outbox.oldest_age_seconds).toBeGreaterThanOrEqual(590);

    const retention = await json(await c.call("/api/retention", { headers: bearer }));
    expect(retention).toMatchObject({ dedup_records: 2, replay_window_ms: 14 * 86_400_000, handlers: [{ handler: "retention", records: 2, purged_through: null }] });
    expect((retention.hold as { reason: string }).reason).toBe("conflict");
    expect(new Date(retention.cutoff as string).getTime()).toBeLessThan(Date.now() - 13 * 86_400_000);
    const page = await (await c.call("/status", { headers: { cookie: (await c.login(TEST_TOKEN)).cookie } })).text();
    expect(page).toMatch(/<dd id="outbox-pending">1<\/dd>/);
    expect(page).toContain("2 dedup records.");
    expect(page).toMatch(/<td class="detail">unroutable: no queue bound<\/td>/);
  });

  it("without a token: answers loopback host names only, and a page's forms still carry a CSRF token", async () => {
    const { f, c } = await seededConsole(kind, {});
    expect((await c.call("/api/quarantine")).status).toBe(200);
    // A DNS-rebound name reaches the same socket with another Host header (fetch cannot set it).
    const rebound = await new Promise<number>((done, fail) => {
      const req = request(`${c.url}/api/quarantine`, { headers: { host: "attacker.example" } }, (res) => { res.resume(); done(res.statusCode!); });
      req.once("error", fail);
      req.end();
    });
    expect(rebound).toBe(403);
    const [invalid] = await f.ops.listQuarantineEntries({ reason: "invalid" });
    const form = await c.call(`/entries/${invalid!.id}/discard`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "reason=forged" });
    expect(form.status).toBe(403);
    const crossSite = await c.call(`/api/quarantine/${invalid!.id}/discard`, { method: "POST", headers: { "content-type": "text/plain" }, body: JSON.stringify({ reason: "forged" }) });
    expect(crossSite.status).toBe(403);
    expect((await f.ops.getQuarantineEntry(invalid!.id))?.status).toBe("held");
    const page = await c.call("/");
    expect(page.status).toBe(200);
    expect(page.headers.get("set-cookie")).toMatch(/HttpOnly; SameSite=Strict/);
  });
});

describe("console mounted under a path, as docs/console.md shows it", () => {
  /** Login, pages, the API and a JSON POST through the mount: links and the cookie carry the path. */
  async function exercise(base: string): Promise<void> {
    const page = await fetch(`${base}/ops/console/entries`, { redirect: "manual" });
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe("/ops/console/login");
    const login = await fetch(`${base}/ops/console/login`, {
      method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `token=${TEST_TOKEN}`,
    });
    expect(login.headers.get("location")).toBe("/ops/console/");
    expect(login.headers.get("set-cookie")).toMatch(/Path=\/ops\/console;/);
    const cookie = login.headers.get("set-cookie")!.split(";")[0]!;
    const listed = await (await fetch(`${base}/ops/console/entries`, { headers: { cookie } })).text();
    expect(listed).toContain('href="/ops/console/assets/console.css"');
    expect(listed).toMatch(/href="\/ops\/console\/entries\/\d+"/);
    const groups = await fetch(`${base}/ops/console/api/groups`, { headers: bearer });
    expect(groups.status).toBe(200);
    expect(((await json(groups)).groups as unknown[]).length).toBe(2);
    // The console reads the body itself: the framework must not have consumed it.
    const dry = await fetch(`${base}/ops/console/api/bulk/discard`, post({ filter: { reason: "invalid" }, dryRun: true }));
    expect(dry.status).toBe(200);
    expect(await json(dry)).toMatchObject({ dry_run: true, selected: 3 });
  }

  /** The console in an Express app under /ops/console, as the docs mount it; `before` runs in front of it. */
  async function inExpress(options: Partial<ConsoleOptions>, before?: (app: express.Express) => void): Promise<{ f: RetentionFixture; base: string }> {
    const f = await seeded(TEST_DATABASES[0]!);
    const handler = createConsoleHandler({ store: f.store, token: TEST_TOKEN, basePath: "/ops/console", ...options });
    const app = express();
    before?.(app);
    app.use("/ops/console", handler);
    const server = app.listen(0, "127.0.0.1");
    await new Promise<void>((done) => server.once("listening", () => done()));
    cleanups.push(async () => { server.closeAllConnections(); await new Promise((done) => server.close(done)); await handler.close(); });
    return { f, base: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
  }

  it("in Express, which strips the mount path", async () => {
    await exercise((await inExpress({})).base);
  });

  it("behind a body parser, says so instead of acting on an empty body, whether the body had a length or came in chunks", async () => {
    const lines: LogLine[] = [];
    const { f, base } = await inExpress({ logger: recordingLogger(lines) }, (app) => app.use(express.json()));
    const body = { filter: { reason: "invalid" }, reason: "x", expected: 3 };
    const discard = await fetch(`${base}/ops/console/api/bulk/discard`, post(body));
    expect(discard.status).toBe(500);
    expect((await json(discard)).error).toMatch(/^internal error: the request body was read before the console got it: mount the console before any body-parsing middleware/);
    // Without a Content-Length: a body sent in chunks, read all the same by the parser.
    const chunked = await new Promise<{ status: number; text: string }>((done, fail) => {
      const r = request(`${base}/ops/console/api/bulk/discard`, { method: "POST", headers: { "content-type": "application/json", ...bearer } }, (res) => {
        let text = "";
        res.on("data", (c: Buffer) => { text += c.toString(); });
        res.on("end", () => done({ status: res.statusCode!, text }));
      });
      r.on("error", fail);
      r.write(JSON.stringify(body));
      r.end();
    });
    expect(chunked.status).toBe(500);
    expect(chunked.text).toContain("the request body was read before the console got it");
    expect(logged(lines, "console request failed").map((l) => l.fields.error)).toEqual([
      expect.stringMatching(/body was read before the console/), expect.stringMatching(/body was read before the console/),
    ]);
    expect(await f.ops.auditLog()).toEqual([]);
    // Reads carry no body and still work.
    expect((await fetch(`${base}/ops/console/api/groups`, { headers: bearer })).status).toBe(200);
  });

  it("in Fastify, handed the raw request with Fastify's body parsers removed", async () => {
    const f = await seeded(TEST_DATABASES[0]!);
    const fastify = Fastify();
    // The base path with a trailing slash mounts the same.
    const handler = createConsoleHandler({ store: f.store, token: TEST_TOKEN, basePath: "/ops/console/" });
    fastify.removeAllContentTypeParsers();
    fastify.addContentTypeParser("*", (_req, _payload, done) => done(null));
    fastify.all("/ops/console", (req, reply) => { reply.hijack(); handler(req.raw, reply.raw); });
    fastify.all("/ops/console/*", (req, reply) => { reply.hijack(); handler(req.raw, reply.raw); });
    const address = await fastify.listen({ port: 0, host: "127.0.0.1" });
    cleanups.push(async () => { await fastify.close(); await handler.close(); });
    await exercise(address);
  });
});

describe("console failures", () => {
  it("a database it cannot reach is a 500 that names the trouble, logged, without the password; the next request tries again", async () => {
    const logged: Array<{ msg: string; fields: Record<string, unknown> }> = [];
    const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: (msg: string, fields: Record<string, unknown> = {}) => { logged.push({ msg, fields }); } };
    const c = await startConsole({ databaseUrl: "postgres://ops:s3cret-pw@127.0.0.1:1/nowhere", token: TEST_TOKEN, logger });
    for (const attempt of [1, 2]) {
      const r = await c.call("/api/outbox", { headers: bearer });
      expect(r.status, `attempt ${attempt}`).toBe(500);
      const body = await r.text();
      expect(body).toMatch(/internal error: .*(connect|ECONNREFUSED)/i);
      expect(body).not.toContain("s3cret-pw");
    }
    const login = await c.call("/login", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `token=${TEST_TOKEN}` });
    const page = await c.call("/status", { headers: { cookie: login.headers.get("set-cookie")!.split(";")[0]! } });
    expect(page.status).toBe(500);
    expect(await page.text()).not.toContain("s3cret-pw");
    expect(logged.length).toBe(3);
    expect(logged[0]).toMatchObject({ msg: "console request failed", fields: { method: "GET", path: "/api/outbox" } });
    expect(JSON.stringify(logged)).not.toContain("s3cret-pw");
  });
});
