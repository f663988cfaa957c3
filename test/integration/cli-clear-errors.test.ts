/**
 * Failures name what failed and how to fix it: the ledger tells the broker from the database, a
 * missing vhost and an unparsable URL say so (naming the variable), a bad setting is refused
 * before anything connects, a server never reached is not a connection "lost", an absurd replay
 * window is a usage error, and `migrate` without a database does not invent one. Real
 * processes, real broker and databases.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadDriver, packageOf } from "../../src/store/load-driver.js";
import { createSqliteFile, createPgSchema } from "../support/databases.js";
import { redactSecrets } from "../../src/core/redact-secrets.js";
import { amqpUrl } from "../support/broker.js";
import { type CliRun, ROOT, runRabbitInbox } from "../support/rabbit-inbox-cli.js";

/** The tests' broker (TEST_AMQP_URL) with another virtual host. */
function onVhost(vhost: string): string {
  const url = new URL(amqpUrl);
  url.pathname = `/${vhost}`;
  return url.toString();
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** A process from the repository's launcher or tsx, in `cwd`, without the test's own settings. */
function run(command: string[], env: Record<string, string>, cwd = ROOT): Promise<CliRun> {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["NODE_OPTIONS", "DATABASE_URL", "AMQP_URL", "LEDGER_QUEUE", "RABBIT_INBOX_FAULT"]) delete base[name];
  // The broker the tests use (TEST_AMQP_URL), unless a case names another.
  base.AMQP_URL = amqpUrl;
  return new Promise((done, fail) => {
    const child = spawn(command[0]!, command.slice(1), { cwd, env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => { stdout += c.toString("utf8"); });
    child.stderr.on("data", (c: Buffer) => { stderr += c.toString("utf8"); });
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.once("error", fail);
    child.once("close", (code) => { clearTimeout(timer); done({ code, stdout, stderr }); });
  });
}

const ledger = (env: Record<string, string>) => run([join(ROOT, "node_modules/.bin/tsx"), "examples/ledger/main.ts"], { LEDGER_QUEUE: `ri.test.errors.${randomBytes(4).toString("hex")}`, ...env });

/** The last line on stderr that is not a JSON log line. */
function lastPlainLine(result: CliRun): string {
  return result.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("{")).pop() ?? "";
}

function expectOneLine(result: CliRun, code: number, pattern: RegExp): void {
  expect(result.stdout).toBe("");
  const lines = result.stderr.split("\n").filter((l) => l !== "");
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(result.code).toBe(code);
}

describe("the ledger says whether the broker or the database failed", () => {
  it("an unreachable database, an unreachable broker, a missing vhost, an unparsable DATABASE_URL", async () => {
    const file = await createSqliteFile();
    cleanups.push(() => file.remove());
    const [database, broker, vhost, badUrl] = await Promise.all([
      ledger({ DATABASE_URL: "postgres://postgres:S3cretPW@127.0.0.1:1/test" }),
      ledger({ DATABASE_URL: file.file, AMQP_URL: "amqp://guest:guest@127.0.0.1:1" }),
      ledger({ DATABASE_URL: file.file, AMQP_URL: onVhost(`ri-no-such-vhost-${randomBytes(3).toString("hex")}`) }),
      // Never parsed, never reached: the host does not matter.
      ledger({ DATABASE_URL: "postgres://postgres:pa#ss@db.invalid:5432/test" }),
    ]);
    for (const r of [database, broker, vhost, badUrl]) expect(r.code).toBe(1);
    expect(lastPlainLine(database)).toMatch(/^ledger: database \(DATABASE_URL=postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/test\): .*ECONNREFUSED/);
    expect(lastPlainLine(broker)).toMatch(/^ledger: RabbitMQ \(AMQP_URL=amqp:\/\/guest:\*\*\*@127\.0\.0\.1:1\): connect ECONNREFUSED 127\.0\.0\.1:1$/);
    expect(lastPlainLine(vhost)).toMatch(/^ledger: RabbitMQ \(AMQP_URL=.*\): RabbitMQ refused to open virtual host "ri-no-such-vhost-[0-9a-f]+": it does not exist, or user "guest" has no permission on it/);
    expect(lastPlainLine(badUrl)).toMatch(/^ledger: database \(DATABASE_URL=postgres:\/\/postgres:\*\*\*@.*\): DATABASE_URL is not a valid URL: percent-encode/);
    for (const r of [database, broker, vhost, badUrl]) expect(r.stderr).not.toMatch(/S3cretPW|pa#ss|ConnectionOpenOk/);
  });
});

describe("the ledger refuses a bad setting before it connects", () => {
  it("LEDGER_OUTBOX_MAX_PENDING that is not a positive integer", async () => {
    const file = await createSqliteFile();
    cleanups.push(() => file.remove());
    const [word, zero] = await Promise.all([
      ledger({ DATABASE_URL: file.file, LEDGER_OUTBOX_MAX_PENDING: "ten" }),
      ledger({ DATABASE_URL: file.file, LEDGER_OUTBOX_MAX_PENDING: "0" }),
    ]);
    expect(lastPlainLine(word)).toBe('ledger: LEDGER_OUTBOX_MAX_PENDING must be a positive integer, got "ten"');
    expect(lastPlainLine(zero)).toBe('ledger: LEDGER_OUTBOX_MAX_PENDING must be a positive integer, got "0"');
    for (const r of [word, zero]) {
      expect(r.code).toBe(1);
      // Refused before anything was opened: no consuming, no database step.
      expect(r.stderr).not.toMatch(/"msg":"consuming"|ledger: database/);
    }
  });
});

describe("rabbit-inbox: clear errors", () => {
  it("a server never reached is 'cannot connect', not a connection lost", async () => {
    const [postgres, mysql] = await Promise.all([
      runRabbitInbox(["status"], { DATABASE_URL: "postgres://postgres@127.0.0.1:1/test" }),
      runRabbitInbox(["status"], { DATABASE_URL: "mysql://root@127.0.0.1:1/test" }),
    ]);
    expectOneLine(postgres, 1, /^rabbit-inbox: cannot connect to PostgreSQL: connect ECONNREFUSED 127\.0\.0\.1:1$/);
    expectOneLine(mysql, 1, /^rabbit-inbox: cannot connect to MySQL: connect ECONNREFUSED 127\.0\.0\.1:1$/);
  });

  it("an unparsable URL names the variable or option it came from, exit 2", async () => {
    const [fromEnv, fromOption] = await Promise.all([
      runRabbitInbox(["status"], { DATABASE_URL: "postgres://postgres:pa#ss@db.invalid:5432/test" }),
      runRabbitInbox(["status", "--database-url", "mysql://root:pa#ss@db.invalid:3306/test"]),
    ]);
    expectOneLine(fromEnv, 2, /^rabbit-inbox: DATABASE_URL is not a valid URL \(postgres:\/\/postgres:\*\*\*@db\.invalid:5432\/test\): percent-encode @ : \/ \? #/);
    expectOneLine(fromOption, 2, /^rabbit-inbox: --database-url is not a valid URL \(mysql:\/\/root:\*\*\*@db\.invalid:3306\/test\)/);
    expect(fromEnv.stderr + fromOption.stderr).not.toContain("pa#ss");
  });

  it("doctor: a missing vhost and an unparsable AMQP URL say so", async () => {
    const file = await createSqliteFile();
    cleanups.push(() => file.remove());
    expect((await runRabbitInbox(["migrate"], { DATABASE_URL: file.file })).code).toBe(0);
    const vhost = `ri-no-such-vhost-${randomBytes(3).toString("hex")}`;
    const [missing, unparsable] = await Promise.all([
      runRabbitInbox(["doctor", "--queue", "q", "--amqp-url", onVhost(vhost)], { DATABASE_URL: file.file }),
      runRabbitInbox(["doctor", "--queue", "q", "--amqp-url", "amqp://guest:gu#est@db.invalid:5672"], { DATABASE_URL: file.file }),
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(new RegExp(`^FAIL\\s+broker: cannot connect to ${escapeRegExp(redactSecrets(onVhost(vhost)))}: RabbitMQ refused to open virtual host "${vhost}"`, "m"));
    expect(missing.stdout).not.toContain("ConnectionOpenOk");
    expect(unparsable.stdout).toMatch(/^FAIL\s+broker: cannot connect to .*: not a valid AMQP URL .*percent-encode/m);
    expect(unparsable.stdout).not.toContain("gu#est");
  });

  it("cleanup --older-than 99999999d is a usage error about the window, on PostgreSQL and SQLite", async () => {
    const schema = await createPgSchema();
    cleanups.push(() => schema.drop());
    const file = await createSqliteFile();
    cleanups.push(() => file.remove());
    for (const url of [schema.url, file.file]) {
      expect((await runRabbitInbox(["migrate"], { DATABASE_URL: url })).code).toBe(0);
      const result = await runRabbitInbox(["cleanup", "--older-than", "99999999d"], { DATABASE_URL: url });
      expectOneLine(result, 2, /^rabbit-inbox: replay window 99999999d is longer than the maximum of 36500d \(100 years\)/);
      expect(result.stderr).not.toMatch(/22008|out of range/);
      // The longest window accepted still runs (and purges nothing).
      expect((await runRabbitInbox(["cleanup", "--older-than", "36500d"], { DATABASE_URL: url })).code).toBe(0);
    }
  });

  it("migrate without a database refuses to create ./data/ledger.sqlite; with the path given it does", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ri-migrate-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const launcher = [process.execPath, join(ROOT, "bin/rabbit-inbox.js")];
    const refused = await run([...launcher, "migrate"], {}, dir);
    expectOneLine(refused, 2, /^rabbit-inbox: no database given: pass --database-url or set DATABASE_URL/);
    expect(existsSync(join(dir, "data"))).toBe(false);
    const created = await run([...launcher, "migrate", "--database-url", "./data/ledger.sqlite"], {}, dir);
    expect(created.code, created.stderr).toBe(0);
    expect(existsSync(join(dir, "data/ledger.sqlite"))).toBe(true);
    const again = await run([...launcher, "migrate"], {}, dir);
    expect(again.code).toBe(0);
    expect(again.stderr).toBe("note: no --database-url or DATABASE_URL: migrating the existing ./data/ledger.sqlite\n");
    expect(again.stdout).toMatch(/schema already at version \d+; nothing to do/);
  });
});

describe("a missing driver", () => {
  it("names the package to install, not the module path", async () => {
    expect(packageOf("mysql2/promise")).toBe("mysql2");
    expect(packageOf("@prisma/client/runtime")).toBe("@prisma/client");
    expect(packageOf("pg")).toBe("pg");
    await expect(loadDriver("ri-no-such-driver/promise", "the test store")).rejects.toThrow(
      /^the test store needs the "ri-no-such-driver" package: npm install ri-no-such-driver$/);
  });
});
