/**
 * The operator console mounted in a Nest application (RabbitInboxConsoleModule) on Express and on
 * Fastify, behind the application's own guard: the guard decides who gets in, the audit names the
 * caller the application vouched for, the console's Origin and CSRF checks still hold, and bodies
 * that Nest's parsers read first reach the console from the raw bytes Nest kept.
 */
import "reflect-metadata";
import { request } from "node:http";
import { type CanActivate, type ExecutionContext, type INestApplication, Injectable, Module } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { FastifyAdapter } from "@nestjs/platform-fastify";
import { afterEach, describe, expect, it } from "vitest";
import { createConsoleHandler } from "../../src/operations.js";
import { RabbitInboxConsoleModule } from "../../src/nestjs/index.js";
import { type RetentionFixture, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { onSelectedDatabases } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** Lets in the requests that name a user; Nest answers the others 403 before the console sees them. */
@Injectable()
class UserGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    return typeof req.headers["x-user"] === "string";
  }
}

interface Answer { status: number; headers: Record<string, string | string[] | undefined>; body: string }

/** A request with the Host header of our choosing (a fetch cannot set it). */
function call(base: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? "GET", headers: { host: "ops.example.com", ...options.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

async function seeded(): Promise<RetentionFixture> {
  const f = await retentionFixture("postgres");
  const p = f.pipeline();
  for (const i of [1, 2, 3]) await p.process([delivery(`{broken ${i}` as unknown as object)]);
  await p.process([delivery(event("c-1", { n: 1 }))]);
  return f;
}

type Platform = "express" | "fastify";

async function nestConsole(f: RetentionFixture, platform: Platform, rawBody = true): Promise<string> {
  @Module({
    imports: [RabbitInboxConsoleModule.register({
      path: "ops/console", guards: [UserGuard], store: f.store,
      actor: (req: { headers: Record<string, string | undefined> }) => req.headers["x-user"],
    })],
  })
  class AppModule {}
  const app: INestApplication = platform === "express"
    ? await NestFactory.create(AppModule, { logger: false, rawBody })
    : await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false, rawBody });
  cleanups.push(() => app.close());
  await app.listen(0, "127.0.0.1");
  return app.getUrl();
}

const platforms = onSelectedDatabases(["postgres" as const]).length > 0 ? (["express", "fastify"] as const) : [];

describe.each(platforms)("the console in a Nest application on %s", (platform) => {
  it("lets in only what the guard lets in, under any host name, and audits the caller the application names", async () => {
    const f = await seeded();
    const base = await nestConsole(f, platform);
    const user = { "x-user": "alice" };

    const refused = await call(base, "/ops/console/api/quarantine");
    expect(refused.status).toBe(403);
    expect(refused.body).toContain("Forbidden resource"); // Nest's answer: the console never ran

    const listed = await call(base, "/ops/console/api/quarantine", { headers: user });
    expect(listed.status).toBe(200);
    const entries = (JSON.parse(listed.body) as { entries: Array<{ id: number; reason: string }> }).entries;
    expect(entries.filter((e) => e.reason === "invalid")).toHaveLength(3);
    const page = await call(base, "/ops/console/", { headers: user });
    expect(page.status).toBe(200);
    expect(page.body).toContain("/ops/console/assets/console.css");

    const [first, second, third] = entries.filter((e) => e.reason === "invalid");
    const discard = (id: number, headers: Record<string, string>) => call(base, `/ops/console/api/quarantine/${id}/discard`, {
      method: "POST", headers: { "content-type": "application/json", ...user, ...headers }, body: JSON.stringify({ reason: "garbage" }),
    });
    // Another site cannot ride on the application's session: the Origin check stays.
    expect((await discard(first!.id, { origin: "https://evil.example" })).status).toBe(403);
    expect((await f.ops.getQuarantineEntry(first!.id))?.status).toBe("held");
    // A header cannot rename the caller the application vouched for.
    const done = await discard(first!.id, { "x-console-actor": "mallory" });
    expect(done.status).toBe(200);
    expect((await f.ops.quarantineAudit(first!.id))[0]).toMatchObject({ action: "discard", actor: "console:alice", reason: "garbage" });

    // A page's form: the session's CSRF token in a urlencoded body that Nest's parser read first.
    const visit = await call(base, `/ops/console/entries/${second!.id}`, { headers: user });
    const cookie = String(visit.headers["set-cookie"]).split(";")[0]!;
    const csrf = /name="_csrf" value="([^"]+)"/.exec(visit.body)?.[1];
    expect(csrf).toBeDefined();
    const form = (body: Record<string, string>, id = second!.id) => call(base, `/ops/console/entries/${id}/discard`, {
      method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", cookie, ...user }, body: new URLSearchParams(body).toString(),
    });
    expect((await form({ reason: "forged" }, third!.id)).status).toBe(403);
    expect((await form({ _csrf: csrf!, reason: "from the page" })).status).toBe(303);
    expect((await f.ops.quarantineAudit(second!.id))[0]).toMatchObject({ actor: "console:alice", reason: "from the page" });
    expect((await f.ops.getQuarantineEntry(third!.id))?.status).toBe("held");
  });

  it("without rawBody, a change is refused with the fix, never run on an empty body", async () => {
    const f = await seeded();
    const base = await nestConsole(f, platform, false);
    const [entry] = await f.ops.listQuarantineEntries({ reason: "invalid" });
    const answer = await call(base, `/ops/console/api/quarantine/${entry!.id}/discard`, {
      method: "POST", headers: { "content-type": "application/json", "x-user": "alice" }, body: JSON.stringify({ reason: "garbage" }),
    });
    expect(answer.status).toBe(500);
    expect(answer.body).toContain("rawBody: true");
    expect((await f.ops.getQuarantineEntry(entry!.id))?.status).toBe("held");
  });
});

describe("the console's authenticatedCaller", () => {
  it("cannot be combined with a token, and a mount needs a guard", async () => {
    const f = await seeded();
    expect(() => createConsoleHandler({ store: f.store, token: "a-long-enough-console-token", authenticatedCaller: () => "x" })).toThrow(/a token or an authenticatedCaller, not both/);
    expect(() => RabbitInboxConsoleModule.register({ path: "ops", guards: [], store: f.store })).toThrow(/at least one guard/);
  });
});
