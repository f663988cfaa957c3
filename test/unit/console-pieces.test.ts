import { describe, expect, it } from "vitest";
import { parseFilter } from "../../src/console/console-filter.js";
import { ConsoleRequestError } from "../../src/console/console-request-error.js";
import { AuthThrottle } from "../../src/console/auth-throttle.js";
import { ConsoleSessions, consoleActor, csrfMatches, isLoopbackHost } from "../../src/console/console-sessions.js";
import { escapeHtml, html } from "../../src/console/html.js";
import type { IncomingMessage } from "node:http";

const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe("console pieces", () => {
  it("escapes every interpolated value, and only markup built by html stays markup", () => {
    expect(escapeHtml(`<script>"x" & 'y'</script>`)).toBe("&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;");
    const inner = html`<b>${"<i>"}</b>`;
    expect(html`<p title="${'" onmouseover="x'}">${inner}${["<a>", 1, null, false]}</p>`.text)
      .toBe('<p title="&quot; onmouseover=&quot;x"><b>&lt;i&gt;</b>&lt;a&gt;1</p>');
  });

  it("loopback names are loopback; everything else is not", () => {
    for (const host of ["127.0.0.1", "127.0.0.1:8089", "localhost", "localhost:1", "[::1]:8089", "::1", "127.8.9.10"]) expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ["0.0.0.0", "::", "192.168.1.2:80", "localhost.evil.example", "127.0.0.1.nip.io", "[::]:8089", ""]) expect(isLoopbackHost(host), host).toBe(false);
  });

  it("a bearer token must match exactly; a session is found by its cookie and its CSRF token must match", () => {
    const sessions = new ConsoleSessions("the-right-token-123456");
    expect(sessions.callerOf(request({}))).toBeNull();
    expect(sessions.callerOf(request({ authorization: "Bearer the-right-token-12345" }))).toBeNull();
    expect(sessions.callerOf(request({ authorization: "Bearer the-right-token-123456x" }))).toBeNull();
    expect(sessions.callerOf(request({ authorization: "Bearer the-right-token-123456" }))).toMatchObject({ via: "bearer", actor: "console:api" });
    const session = sessions.open("alice\u0007");
    expect(session.actor).toBe("console:alice");
    expect(session.id).not.toContain("the-right-token");
    expect(sessions.callerOf(request({ cookie: `other=1; rabbit_inbox_console=${session.id}` }))).toMatchObject({ via: "session", actor: "console:alice" });
    expect(sessions.callerOf(request({ cookie: "rabbit_inbox_console=forged" }))).toBeNull();
    expect(csrfMatches(session, session.csrf)).toBe(true);
    expect(csrfMatches(session, undefined)).toBe(false);
    expect(csrfMatches(session, "")).toBe(false);
    expect(csrfMatches(session, session.csrf.slice(1))).toBe(false);
    sessions.close(session.id);
    expect(sessions.callerOf(request({ cookie: `rabbit_inbox_console=${session.id}` }))).toBeNull();
    expect(consoleActor(undefined)).toBe("console");
    expect(new ConsoleSessions(undefined).callerOf(request({}))).toMatchObject({ via: "open", actor: "console" });
  });

  it("without a token, a page visit's session is stored nowhere: its cookie and CSRF token check out, a forged or expired one does not", () => {
    let now = 1_000_000;
    const sessions = new ConsoleSessions(undefined, 60_000, () => now);
    const visit = sessions.openAnonymous();
    const cookie = { cookie: `rabbit_inbox_console=${visit.id}` };
    expect(sessions.callerOf(request(cookie))).toMatchObject({ via: "session", actor: "console", session: { csrf: visit.csrf } });
    // Another process (another key) does not take it; a changed cookie gets another CSRF token, or none.
    expect(new ConsoleSessions(undefined, 60_000, () => now).sessionOf(request(cookie))?.csrf).not.toBe(visit.csrf);
    expect(sessions.sessionOf(request({ cookie: `rabbit_inbox_console=${visit.id.slice(0, -1)}x` }))?.csrf).not.toBe(visit.csrf);
    expect(sessions.sessionOf(request({ cookie: "rabbit_inbox_console=a.zz.short" }))).toBeNull();
    // A console with a token never takes an anonymous cookie.
    expect(new ConsoleSessions("t".repeat(20)).callerOf(request(cookie))).toBeNull();
    expect(() => new ConsoleSessions("t".repeat(20)).openAnonymous()).toThrow();
    now += 60_001;
    expect(sessions.sessionOf(request(cookie))).toBeNull();
  });

  it("stored sessions are bounded per client: a client's logins push out its own oldest, never another client's", () => {
    const sessions = new ConsoleSessions("t".repeat(20));
    const alice = sessions.open("alice", "10.0.0.2");
    const bobs = Array.from({ length: 50 }, () => sessions.open("bob", "10.0.0.1"));
    const alive = (id: string) => sessions.sessionOf(request({ cookie: `rabbit_inbox_console=${id}` })) !== null;
    expect(alive(alice.id)).toBe(true);
    expect(bobs.filter((b) => alive(b.id))).toEqual(bobs.slice(-20));
  });

  it("failed authentications: past the limit within the window a client waits, others do not; the block ends with the window", () => {
    let now = 0;
    const throttle = new AuthThrottle(3, 60_000, () => now);
    for (const at of [0, 10_000, 20_000]) {
      now = at;
      expect(throttle.blockedFor("a")).toBe(0);
      throttle.fail("a");
    }
    expect(throttle.blockedFor("a")).toBe(40_000);
    expect(throttle.blockedFor("b")).toBe(0);
    now = 59_999;
    expect(throttle.blockedFor("a")).toBe(1);
    now = 60_000;
    expect(throttle.blockedFor("a")).toBe(0);
    throttle.fail("a");
    expect(throttle.blockedFor("a")).toBe(10_000);
  });

  it("failed authentications from many clients keep a bounded record", () => {
    let now = 0;
    const throttle = new AuthThrottle(2, 1_000, () => now, 100);
    for (let i = 0; i < 1_000; i++) throttle.fail(`10.0.${i >> 8}.${i & 255}`);
    expect((throttle as unknown as { failures: Map<string, number[]> }).failures.size).toBeLessThanOrEqual(100);
    now = 5_000;
    throttle.fail("x");
    expect((throttle as unknown as { failures: Map<string, number[]> }).failures.size).toBeLessThanOrEqual(100);
  });

  it("an expired session is gone", () => {
    const sessions = new ConsoleSessions("t".repeat(20), -1);
    const session = sessions.open("bob");
    expect(sessions.callerOf(request({ cookie: `rabbit_inbox_console=${session.id}` }))).toBeNull();
  });

  it("reads a filter and refuses what it cannot mean", () => {
    const q = (text: string) => { const p = new URLSearchParams(text); return parseFilter((n) => p.get(n) ?? undefined); };
    expect(q("")).toEqual({ status: "held", limit: 50 });
    expect(q("status=all&handler=h&reason=conflict&tenant=t&since=2026-01-01T00:00:00Z&after=7&limit=10&text=x")).toEqual({
      status: "all", handler: "h", reason: "conflict", tenant: "t", since: new Date("2026-01-01T00:00:00Z"), afterId: 7, limit: 10, text: "x",
    });
    // A time without a zone is UTC whatever the server's time zone; one with a zone keeps it.
    const zone = process.env.TZ;
    process.env.TZ = "America/New_York";
    try {
      expect(q("since=2026-01-01T10:00").since).toEqual(new Date("2026-01-01T10:00:00Z"));
      expect(q("until=2026-01-01T10:00:00%2B02:00").until).toEqual(new Date("2026-01-01T08:00:00Z"));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    for (const bad of ["status=gone", "since=yesterday", "after=0", "after=-1", "limit=501", "limit=1.5"]) expect(() => q(bad), bad).toThrow(ConsoleRequestError);
    // The selection reads as the command's flags do: durations ago, and the same checks.
    const at = new Date("2026-12-01T12:00:00Z");
    const p = (text: string) => { const f = new URLSearchParams(text); return parseFilter((n) => f.get(n) ?? undefined, at); };
    expect(p("since=2h&until=30m")).toMatchObject({ since: new Date("2026-12-01T10:00:00Z"), until: new Date("2026-12-01T11:30:00Z") });
    expect(p("group=&fingerprint=")).toEqual({ status: "held", limit: 50 });
    for (const [bad, message] of [
      ["since=Dec 1, 2026", /^since takes an ISO time/],
      ["since=1h&until=2h", /^since \(2026-12-01T11:00:00.000Z\) must be before until/],
      ["group=nope", /^group must be a group key/],
      ["fingerprint=abc", /^fingerprint must be a SHA-256/],
    ] as const) {
      expect(() => p(bad), bad).toThrow(message);
      expect(() => p(bad), bad).toThrow(expect.objectContaining({ name: "ConsoleRequestError", status: 400 }));
    }
  });
});
