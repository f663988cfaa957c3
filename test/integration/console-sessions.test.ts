/**
 * The console's sessions and tokens under a flood: cookie-less page visits to a console without a
 * token (any web page the operator has open can send them) cannot evict the operator's session;
 * one client logging in again and again cannot evict another client's; wrong bearer tokens and
 * wrong login tokens are throttled per client (429 with Retry-After, the right token included,
 * while the client is blocked) and logged without the token. Clients are told apart by address:
 * the tests connect from 127.0.0.1 and 127.0.0.2. The database is the first selected one.
 */
import { request } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { TEST_TOKEN, startConsole } from "../support/console-server.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";
import { type RetentionFixture, delivery, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

interface Answer { status: number; headers: Record<string, string | string[] | undefined>; body: string }

/** A request from a chosen local address (fetch cannot choose one). */
function from(address: string, url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((done, fail) => {
    const target = new URL(url);
    const req = request({ host: target.hostname, port: target.port, path: target.pathname + target.search, method: options.method ?? "GET", headers: options.headers, localAddress: address }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => { body += c.toString("utf8"); });
      res.on("end", () => done({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.once("error", fail);
    req.end(options.body);
  });
}

/** `n` requests, `width` at a time. */
async function flood(n: number, width: number, send: () => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = [];
  let sent = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (sent < n) {
      sent++;
      answers.push(await send());
    }
  }));
  return answers;
}

async function withInvalidEntries(): Promise<RetentionFixture> {
  const f = await retentionFixture(TEST_DATABASES[0]!);
  for (const i of [1, 2]) await f.pipeline().process([delivery(`{broken ${i}` as unknown as object)]);
  return f;
}

const form = (fields: Record<string, string>, cookie?: string) => ({
  method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...(cookie ? { cookie } : {}) }, body: new URLSearchParams(fields).toString(),
});

describe("console sessions under a flood", () => {
  it("without a token: 1,000 cookie-less page visits do not evict the operator's session", async () => {
    const f = await withInvalidEntries();
    const c = await startConsole({ store: f.store });
    const page = await c.call("/");
    const cookie = page.headers.get("set-cookie")!.split(";")[0]!;
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!;

    const visits = await flood(1000, 20, () => from("127.0.0.1", `${c.url}/nope`));
    expect(visits.every((v) => v.status === 404)).toBe(true);

    const [entry] = await f.ops.listQuarantineEntries();
    const discarded = await c.call(`/entries/${entry!.id}/discard`, form({ _csrf: csrf, reason: "after the flood" }, cookie));
    expect(discarded.status).toBe(303);
    expect((await f.ops.getQuarantineEntry(entry!.id))?.status).toBe("discarded");
  });

  it("with a token: one client logging in 1,000 times does not evict another client's session", async () => {
    const f = await withInvalidEntries();
    const c = await startConsole({ store: f.store, token: TEST_TOKEN });
    const login = (address: string) => from(address, `${c.url}/login`, form({ token: TEST_TOKEN, name: address }));
    const alice = await login("127.0.0.2");
    expect(alice.status).toBe(303);
    const cookie = String(alice.headers["set-cookie"]).split(";")[0]!;
    const logins = await flood(1000, 20, () => login("127.0.0.1"));
    expect(logins.every((l) => l.status === 303)).toBe(true);

    const still = await from("127.0.0.2", `${c.url}/api/quarantine`, { headers: { cookie } });
    expect(still.status).toBe(200);
  });

  it("wrong tokens are throttled per client (the right one too while blocked) and logged without the token", async () => {
    const f = await withInvalidEntries();
    const lines: LogLine[] = [];
    const c = await startConsole({ store: f.store, token: TEST_TOKEN, logger: recordingLogger(lines) });
    const guess = (i: number) => `guess-${i}-of-the-console-token`;
    const api = (address: string, token: string) => from(address, `${c.url}/api/quarantine`, { headers: { authorization: `Bearer ${token}` } });

    const answers = await flood(2000, 20, (() => { let i = 0; return () => api("127.0.0.1", guess(i++)); })());
    const refused = answers.filter((a) => a.status === 401).length;
    const throttled = answers.filter((a) => a.status === 429);
    // Only the first few guesses are even compared; the rest are refused unread.
    expect(refused).toBeLessThanOrEqual(10);
    expect(throttled.length).toBe(2000 - refused);
    expect(Number(throttled[0]!.headers["retry-after"])).toBeGreaterThan(0);
    expect(JSON.parse(throttled[0]!.body)).toMatchObject({ error: expect.stringMatching(/^too many failed authentications from this client: try again in \d+ s$/) });
    // While blocked, the right token is refused too: a guesser learns nothing from the answers.
    expect((await api("127.0.0.1", TEST_TOKEN)).status).toBe(429);
    // The login form counts against the same client.
    expect((await from("127.0.0.1", `${c.url}/login`, form({ token: TEST_TOKEN }))).status).toBe(429);
    // Another client is not blocked.
    expect((await api("127.0.0.2", TEST_TOKEN)).status).toBe(200);

    const failures = logged(lines, "console authentication failed");
    expect(failures.length).toBeGreaterThan(0);
    expect(failures.length).toBeLessThan(50);
    expect(failures[0]).toMatchObject({ level: "warn", fields: { client: "127.0.0.1", via: "bearer" } });
    expect(JSON.stringify(lines)).not.toMatch(/guess-\d+-of-the-console-token/);
    expect(JSON.stringify(lines)).not.toContain(TEST_TOKEN);
  });
});
