import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BrokerClient } from "../../examples/ledger/driver/broker-client.js";
import { cliBalances, cliQuarantine } from "../../examples/ledger/driver/ledger-cli.js";
import { REPO_ROOT, amqpUrlFromEnv } from "../../examples/ledger/driver/ledger-environment.js";
import { createPgSchema } from "../support/databases.js";

interface Run { code: number; stdout: string; stderr: string }

/** `npm run --silent demo` (or another script, `demo:nest`) with the given environment changes (undefined removes a variable). */
function runDemo(env: Record<string, string | undefined>, script = "demo"): Promise<Run> {
  const merged: NodeJS.ProcessEnv = { ...process.env, AMQP_URL: amqpUrlFromEnv() };
  delete merged.DATABASE_URL;
  delete merged.NODE_OPTIONS;
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete merged[k];
    else merged[k] = v;
  }
  return new Promise((done) => {
    execFile("npm", ["run", "--silent", script], { cwd: REPO_ROOT, env: merged, timeout: 90_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

/** The invariant table must be complete and all PASS; the demo must have cleaned up its queues. */
async function expectCleanRun(run: Run): Promise<void> {
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
  expect(run.stdout).not.toMatch(/FAIL/);
  expect(run.stdout.match(/^ {2}PASS {2}/gm)).toHaveLength(9);
  expect(run.stdout).toMatch(/^All 9 invariants held/m);
  for (const story of ["duplicate", "exited with code 70", "redelivered=true: duplicate", "CONFLICT", "quarantined as invalid", "quarantined as account_missing"]) {
    expect(run.stdout).toContain(story);
  }
  const queue = /queue (ledger\.demo\.[0-9a-f]+)/.exec(run.stdout)?.[1];
  expect(queue).toBeDefined();
  // The metrics excerpt is the restarted consumer's scrape: what it saw after the crash.
  const counter = (name: string, label: string) => new RegExp(`^ {4}rabbit_inbox_${name}\\{queue="${queue!.replace(/\./g, "\\.")}",handler="ledger",${label}\\} (\\d+)$`, "m").exec(run.stdout)?.[1];
  expect(counter("messages_total", 'outcome="duplicate"')).toBe("1");
  expect(counter("messages_total", 'outcome="quarantined"')).toBe("3");
  expect(counter("quarantined_total", 'reason="conflict"')).toBe("1");
  expect(counter("messages_total", 'outcome="applied"')).toBeUndefined();
  const broker = await BrokerClient.connect();
  try {
    await expect(broker.queueState(queue!)).rejects.toThrow(/NOT_FOUND/);
    await expect(broker.queueState(`${queue!}.quarantine`)).rejects.toThrow(/NOT_FOUND/);
  } finally {
    await broker.close();
  }
}

describe("npm run demo", () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it("plays the story on a fresh SQLite file under ./data and every invariant holds", async () => {
    const run = await runDemo({ DATABASE_URL: undefined });
    const file = /database {2}(data\/demo-[\d-]+\.sqlite) \(a fresh SQLite file\)/.exec(run.stdout)?.[1];
    if (file) cleanups.push(() => Promise.all(["", "-wal", "-shm"].map((s) => rm(join(REPO_ROOT, file + s), { force: true }))).then(() => undefined));
    await expectCleanRun(run);
    expect(file).toBeDefined();
    // It says that it leaves the file behind, and how to remove it.
    expect(run.stdout).toContain(`The demo leaves ${file!} behind for that; remove it with \`rm ${file!}*\``);
    // What the demo claims is what the ledger CLI reads from that file.
    expect(await cliBalances(file!)).toEqual([{ tenant: "t1", account_id: "alice", balance_cents: 350 }]);
    expect((await cliQuarantine(file!)).map((q) => q.reason).sort()).toEqual(["account_missing", "conflict", "invalid"]);
  });

  it("honours DATABASE_URL (PostgreSQL), with a tenant of its own", async () => {
    const schema = await createPgSchema();
    cleanups.push(() => schema.drop());
    const run = await runDemo({ DATABASE_URL: schema.url });
    await expectCleanRun(run);
    const tenant = /tenant {4}(demo-[0-9a-f]+)/.exec(run.stdout)?.[1];
    expect(tenant).toBeDefined();
    expect(await cliBalances(schema.url)).toEqual([{ tenant, account_id: "alice", balance_cents: 350 }]);
    // A database of the user's own is not the demo's to remove: no such advice.
    expect(run.stdout).not.toContain("The demo leaves");
  });

  it("npm run demo:nest plays the same story with the Nest ledger (TypeORM on PostgreSQL), and refuses to start without a server database", async () => {
    const schema = await createPgSchema();
    cleanups.push(() => schema.drop());
    const run = await runDemo({ DATABASE_URL: schema.url }, "demo:nest");
    expect(run.stdout).toContain("(the Nest ledger: npm run start:nest, TypeORM)");
    await expectCleanRun(run);
    const tenant = /tenant {4}(demo-[0-9a-f]+)/.exec(run.stdout)?.[1];
    expect(await cliBalances(schema.url)).toEqual([{ tenant, account_id: "alice", balance_cents: 350 }]);

    const refused = await runDemo({ DATABASE_URL: undefined }, "demo:nest");
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--nest .* needs a server database: set DATABASE_URL=postgres:\/\/\.\.\. or mysql:\/\/\.\.\./);
  });

  it("says in one line that the broker is unreachable and how to start it, and exits 1", async () => {
    const run = await runDemo({ AMQP_URL: "amqp://guest:guest@127.0.0.1:1" });
    expect(run.code).toBe(1);
    expect(run.stdout.trim()).toBe("");
    const lines = run.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/RabbitMQ is not reachable at amqp:\/\/guest:\*\*\*@127\.0\.0\.1:1 .*rabbitmq-server -detached/);
  });
});
