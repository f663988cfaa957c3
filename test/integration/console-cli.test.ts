/**
 * `rabbit-inbox console` as a subprocess: it refuses a non-loopback address without a token (and a
 * token too short to be one), serves the console otherwise, never prints or renders the database
 * password, and stops cleanly on SIGTERM.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { amqpUrl } from "../support/broker.js";
import { createPgSchema, pgNode, pgUrl, regexText } from "../support/databases.js";
import { ROOT, runRabbitInbox } from "../support/rabbit-inbox-cli.js";
import { isTestDatabaseSelected } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const PASSWORD = "s3cr3t-console-pw";

/** Starts the command; resolves with the URL it prints once listening. */
function serve(args: string[], env: Record<string, string>): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, AMQP_URL: amqpUrl, ...env };
  delete childEnv.NODE_OPTIONS;
  if (!env.RABBIT_INBOX_CONSOLE_TOKEN) delete childEnv.RABBIT_INBOX_CONSOLE_TOKEN;
  const child = spawn(process.execPath, [join(ROOT, "bin/rabbit-inbox.js"), "console", ...args], { cwd: ROOT, env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stderr.on("data", (chunk: Buffer) => { output += chunk.toString("utf8"); });
  cleanups.push(() => { if (child.exitCode === null) child.kill("SIGKILL"); return Promise.resolve(); });
  return new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`the console did not start:\n${output}`)), 30_000);
    createInterface({ input: child.stdout }).on("line", (line) => {
      output += `${line}\n`;
      const url = /on (http:\/\/\S+?)\/? /.exec(line)?.[1];
      if (url) { clearTimeout(timer); done({ child, url, output: () => output }); }
    });
    child.once("exit", (code) => { clearTimeout(timer); fail(new Error(`the console exited ${code}:\n${output}`)); });
  });
}

describe("rabbit-inbox console", () => {
  it("refuses a non-loopback host without a token, and a short token, with a clear error and exit code 2", async () => {
    for (const host of ["0.0.0.0", "::", "192.0.2.10"]) {
      const run = await runRabbitInbox(["console", "--host", host, "--port", "0"], { DATABASE_URL: "/nonexistent/never-opened.sqlite" });
      expect(run.code).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr.trim()).toBe(`rabbit-inbox: refusing to listen on ${host} without a token: set RABBIT_INBOX_CONSOLE_TOKEN (every request then needs it), or listen on 127.0.0.1`);
    }
    const short = await runRabbitInbox(["console", "--host", "0.0.0.0", "--port", "0"], { RABBIT_INBOX_CONSOLE_TOKEN: "abc" });
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/RABBIT_INBOX_CONSOLE_TOKEN is too short/);
    expect(short.stderr).not.toContain("abc");
  });

  it.runIf(isTestDatabaseSelected("postgres"))("serves on loopback without a token; the database password is never printed nor rendered; SIGTERM stops it", async () => {
    const url = new URL(pgUrl);
    url.password = PASSWORD; // the test server trusts local connections: any password works
    const schema = await createPgSchema(url.toString());
    cleanups.push(() => schema.drop());
    expect((await runRabbitInbox(["migrate"], { DATABASE_URL: schema.url })).code).toBe(0);
    const console = await serve(["--port", "0"], { DATABASE_URL: schema.url });
    expect(console.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    for (const path of ["/", "/status", "/entries", "/audit"]) {
      const response = await fetch(console.url + path);
      expect(response.status, path).toBe(200);
      const page = await response.text();
      expect(page).not.toContain(PASSWORD);
      if (path === "/status") expect(page).toMatch(/Database: <code>postgres postgres:\/\/postgres:\*+@127\.0\.0\.1/);
    }
    expect(await (await fetch(`${console.url}/api/retention`)).json()).toMatchObject({ dedup_records: 0 });
    const exited = new Promise<number | null>((done) => console.child.once("exit", done));
    console.child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(console.output()).not.toContain(PASSWORD);
    expect(console.output()).toMatch(/no token, loopback only/);
  });

  it.runIf(isTestDatabaseSelected("postgres"))("serves a libpq host list whose first node is down, on the node that answers; the password never shown", async () => {
    const url = new URL(pgUrl);
    url.password = PASSWORD;
    const schema = await createPgSchema(url.toString());
    cleanups.push(() => schema.drop());
    expect((await runRabbitInbox(["migrate"], { DATABASE_URL: schema.url })).code).toBe(0);
    const hostList = schema.url.replace(`@${pgNode}/`, `@127.0.0.1:1,${pgNode}/`);
    expect(hostList).not.toBe(schema.url);
    const console = await serve(["--port", "0"], { DATABASE_URL: hostList });
    const status = await (await fetch(`${console.url}/status`)).text();
    expect(status).toMatch(new RegExp(`Database: <code>postgres postgres://postgres:\\*+@127\\.0\\.0\\.1:1,${regexText(pgNode)}/`));
    expect(await (await fetch(`${console.url}/api/retention`)).json()).toMatchObject({ dedup_records: 0 });
    expect(status).not.toContain(PASSWORD);
    console.child.kill("SIGTERM");
    expect(console.output()).not.toContain(PASSWORD);
  });

  it("with a token: every API call needs it", async () => {
    const { createSqliteFile } = await import("../support/databases.js");
    const file = await createSqliteFile();
    cleanups.push(() => file.remove());
    expect((await runRabbitInbox(["migrate"], { DATABASE_URL: file.file })).code).toBe(0);
    const token = "a-console-token-of-32-characters!";
    const console = await serve(["--port", "0"], { DATABASE_URL: file.file, RABBIT_INBOX_CONSOLE_TOKEN: token });
    expect((await fetch(`${console.url}/api/outbox`)).status).toBe(401);
    expect((await fetch(`${console.url}/api/outbox`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect(console.output()).not.toContain(token);
  });
});
