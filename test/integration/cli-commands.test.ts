/**
 * Every `rabbit-inbox` command as a subprocess (bin/rabbit-inbox.js, the package's bin) against a
 * real PostgreSQL schema, MariaDB database or SQLite file and the real broker, with its output checked: help,
 * one-line errors and exit codes, migrate, status, doctor, cleanup and the quarantine commands.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { brokerNodeLabel } from "../../src/amqp/broker-connection.js";
import { amqpUrl, deleteQueues, drainQueue, withChannel } from "../support/broker.js";
import { createEmptyDatabase, createSqliteFile } from "../support/databases.js";
import { outboxTableAt } from "../support/outbox.js";
import { type CliRun, rabbitInboxJson, runRabbitInbox } from "../support/rabbit-inbox-cli.js";
import { HANDLER, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES, type TestDatabaseKind } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** A new, empty database of the kind (an SQLite path not created yet); removed after the test. Returns its DATABASE_URL. */
async function emptyDatabase(kind: TestDatabaseKind): Promise<string> {
  const created = await createEmptyDatabase(kind);
  cleanups.push(created.remove);
  return created.url;
}

/** A failure: exactly one line on stderr, starting with the command's name, nothing on stdout, a non-zero exit. */
function expectOneLineError(run: CliRun, code: number, pattern: RegExp): void {
  expect(run.stdout).toBe("");
  const lines = run.stderr.split("\n").filter((l) => l !== "");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^rabbit-inbox: /);
  expect(lines[0]).toMatch(pattern);
  expect(run.code).toBe(code);
}

describe("rabbit-inbox: help and errors", () => {
  it("--help works on every command and subcommand", async () => {
    const commands = [[], ["migrate"], ["status"], ["doctor"], ["cleanup"], ["quarantine"], ["quarantine", "list"], ["quarantine", "show"],
      ["quarantine", "diff"], ["quarantine", "replay"], ["quarantine", "discard"], ["console"]];
    const runs = await Promise.all(commands.map((c) => runRabbitInbox([...c, "--help"])));
    runs.forEach((run, i) => {
      expect(run.code, commands[i]!.join(" ")).toBe(0);
      expect(run.stdout).toContain(`Usage: rabbit-inbox${commands[i]!.length ? ` ${commands[i]!.join(" ")}` : ""}`);
    });
    expect(runs[4]!.stdout).toContain("--older-than <duration>");
    expect(runs[9]!.stdout).toContain("--accept-new");
  });

  it("errors are one clear line on stderr with a non-zero exit", async () => {
    const file = await createSqliteFile();
    cleanups.push(() => file.remove());
    const env = { DATABASE_URL: file.file };
    expectOneLineError(await runRabbitInbox(["nonsense"], env), 2, /unknown command 'nonsense'/);
    expectOneLineError(await runRabbitInbox(["status"], env), 2, /no SQLite database at .*inbox\.sqlite.*rabbit-inbox migrate/);
    expect((await runRabbitInbox(["migrate"], env)).code).toBe(0);
    expectOneLineError(await runRabbitInbox(["cleanup"], env), 2, /no replay window configured: pass --older-than or set RABBIT_INBOX_REPLAY_WINDOW/);
    expectOneLineError(await runRabbitInbox(["cleanup", "--older-than", "14"], env), 2, /"14" is not a duration/);
    expectOneLineError(await runRabbitInbox(["cleanup", "--older-than", "2h"], env), 2, /replay window 2h is shorter than the minimum of 1d/);
    expectOneLineError(await runRabbitInbox(["cleanup"], { ...env, RABBIT_INBOX_REPLAY_WINDOW: "1h" }), 2, /replay window 1h is shorter/);
    expectOneLineError(await runRabbitInbox(["quarantine", "show", "x1"], env), 2, /"x1" is not a quarantine entry id/);
    expectOneLineError(await runRabbitInbox(["quarantine", "show", "7"], env), 1, /no quarantine entry #7/);
    expectOneLineError(await runRabbitInbox(["quarantine", "discard", "7"], env), 2, /required option '--reason <text>'/);
    expectOneLineError(await runRabbitInbox(["quarantine", "replay", "7", "--accept-new"], env), 2, /give the --reason/);
    expectOneLineError(await runRabbitInbox(["status", "--database-url", "mongodb://user:secret@host/db"], env), 2, /unsupported scheme/);
    const secret = await runRabbitInbox(["status", "--database-url", "postgres://user:hunter2@127.0.0.1:1/db"]);
    expect(secret.code).not.toBe(0);
    expect(secret.stderr).not.toContain("hunter2");
  });
});

describe.each(TEST_DATABASES)("rabbit-inbox on %s", (kind) => {
  it("migrate is idempotent; status reports records, horizon and quarantine; cleanup purges and moves the horizon", async () => {
    const freshUrl = await emptyDatabase(kind);
    const first = await rabbitInboxJson<{ applied: number[]; appliedNow: number[]; latest: number }>(["migrate"], { DATABASE_URL: freshUrl });
    expect(first.appliedNow).toEqual(first.applied);
    expect(first.applied).toContain(3);
    const again = await runRabbitInbox(["migrate"], { DATABASE_URL: freshUrl });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/schema already at version \d+; nothing to do/);

    const f = await retentionFixture(kind);
    const env = { DATABASE_URL: f.url };
    const pipeline = f.pipeline();
    await pipeline.process([delivery(event("a-1", { n: 1 })), delivery(event("a-2", { n: 2 }))]);
    await pipeline.process([delivery(event("a-2", { n: 3 }))]); // conflict, held
    await pipeline.process([delivery("not json" as unknown as object)]);

    type Status = {
      schema: { upToDate: boolean }; handlers: Array<{ handler: string; records: number; purgeHorizon: string | null }>;
      quarantine: { held: number; byReason: Array<{ reason: string; entries: number }>; hold: { reason: string } | null };
    };
    const status = await rabbitInboxJson<Status>(["status"], env);
    expect(status.schema.upToDate).toBe(true);
    expect(status.handlers).toEqual([expect.objectContaining({ handler: HANDLER, records: 2, purgeHorizon: null })]);
    expect(status.quarantine.held).toBe(2);
    expect(status.quarantine.byReason.map((r) => [r.reason, r.entries]).sort()).toEqual([["conflict", 1], ["invalid", 1]]);
    expect(status.quarantine.hold?.reason).toBe("conflict");
    const text = await runRabbitInbox(["status", "--database-url", f.url]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("never purged");
    expect(text.stdout).toMatch(/quarantine: 2 held, 0 replayed, 0 discarded/);

    // The held conflict keeps its stored record (and everything newer) out of the purge.
    await sleep(5);
    const dry = await runRabbitInbox(["cleanup", "--older-than", "0s", "--force", "--dry-run"], env);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/^dry run: would purge 2 dedup records first seen before/);
    const guarded = await runRabbitInbox(["cleanup", "--older-than", "2d"], env);
    expect(guarded.code).toBe(0);
    expect(guarded.stdout).toMatch(/^purged 0 dedup records/);
    const held = await runRabbitInbox(["cleanup", "--older-than", "0s", "--force", "--json"], env);
    expect(held.code).toBe(0);
    const report = JSON.parse(held.stdout) as { purged: number; batches: number; limitedBy: unknown; horizons: Array<{ handler: string; purgedThrough: string }> };
    expect(report).toMatchObject({ purged: 2, batches: 1, limitedBy: null });
    expect(report.horizons.map((h) => h.handler)).toEqual([HANDLER]);
    const after = await rabbitInboxJson<Status>(["status"], env);
    expect(after.handlers).toEqual([expect.objectContaining({ handler: HANDLER, records: 0, purgeHorizon: report.horizons[0]!.purgedThrough })]);
  });

  it("cleanup without --force stops at the oldest held entry and says which; --force purges past it", async () => {
    const f = await retentionFixture(kind);
    const pipeline = f.pipeline();
    const day = 86_400_000;
    await pipeline.process([delivery(event("o-1")), delivery(event("o-2", { n: 1 })), delivery(event("o-3"))]);
    await pipeline.process([delivery(event("o-2", { n: 2 }))]); // a conflict on o-2, held
    await f.backdate("o-1", 5 * day);
    await f.backdate("o-2", 3 * day);
    await f.backdate("o-3", 2 * day);
    const [entry] = await f.ops.listQuarantineEntries();

    const limited = await runRabbitInbox(["cleanup", "--older-than", "1d"], { DATABASE_URL: f.url });
    expect(limited.code).toBe(0);
    expect(limited.stdout).toMatch(/^purged 1 dedup record of|^purged 1 dedup record first seen before/);
    expect(limited.stderr).toMatch(new RegExp(`^note: stopped at \\S+ instead of \\S+: quarantine entry #${entry!.id} \\(conflict, event o-2\\) is held and its replay needs those records; replay or discard it, or use --force\n$`));
    expect([...(await f.dedup()).keys()].sort()).toEqual(["o-2", "o-3"]);

    const forced = await rabbitInboxJson<{ purged: number; limitedBy: unknown }>(["cleanup", "--older-than", "1d", "--force"], { DATABASE_URL: f.url });
    expect(forced).toMatchObject({ purged: 2, limitedBy: null });
    expect(await f.dedup()).toEqual(new Map());
  });

  it("quarantine list, show, diff and discard", async () => {
    const f = await retentionFixture(kind);
    const env = { DATABASE_URL: f.url };
    const pipeline = f.pipeline();
    await pipeline.process([delivery(event("d-1", { n: 100 }))]);
    await pipeline.process([delivery(event("d-1", { n: 150 }))]); // conflict #1: stored payload unknown
    await pipeline.process([delivery("{broken" as unknown as object)]); // invalid #2

    type Listed = { id: number; reason: string; status: string; event_id: string | null; occurrences: number };
    const listed = await rabbitInboxJson<Listed[]>(["quarantine", "list"], env);
    expect(listed.map((e) => [e.reason, e.status, e.event_id])).toEqual([["conflict", "held", "d-1"], ["invalid", "held", null]]);
    const [conflict, invalid] = listed;
    const table = await runRabbitInbox(["quarantine", "list", "--reason", "conflict"], env);
    expect(table.code).toBe(0);
    expect(table.stdout.split("\n")[0]).toMatch(/^id\s+handler\s+reason\s+status/);
    expect(table.stdout).toContain("conflict");
    expect(table.stdout).not.toContain("invalid");

    const shown = await rabbitInboxJson<{ body: unknown; fingerprint: string; stored_fingerprint: string; audit: unknown[]; properties: unknown }>(
      ["quarantine", "show", String(conflict!.id)], env);
    expect(shown.body).toEqual(event("d-1", { n: 150 }));
    expect(shown.stored_fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(shown.audit).toEqual([]);
    expect(shown.properties).toMatchObject({ properties: { contentType: "application/json" } });

    // The stored version's payload is not kept by the inbox: the diff says so.
    type Diff = { stored: { payload: unknown; note: string | null; fingerprint: string }; new: { payload: unknown }; changes: Array<{ path: string }> };
    const unknownStored = await rabbitInboxJson<Diff>(["quarantine", "diff", String(conflict!.id)], env);
    expect(unknownStored.stored.payload).toBeNull();
    expect(unknownStored.stored.note).toMatch(/keeps only the fingerprint/);
    expect(unknownStored.new.payload).toEqual(event("d-1", { n: 150 }));
    expectOneLineError(await runRabbitInbox(["quarantine", "diff", String(invalid!.id)], env), 1, /is not a conflict \(reason invalid\)/);

    // Accepting the new version keeps its payload in the quarantine: a later conflict shows both sides.
    await f.ops.beginResolution(conflict!.id, { action: "replay", actor: "test", reason: "corrected", acceptNew: true });
    await pipeline.process([delivery(event("d-1", { n: 150 }))]);
    await pipeline.process([delivery(event("d-1", { n: 175, note: "again" }))]);
    const [third] = await f.ops.listQuarantineEntries({ reason: "conflict" });
    const both = await rabbitInboxJson<Diff>(["quarantine", "diff", String(third!.id)], env);
    expect(both.stored.payload).toEqual(event("d-1", { n: 150 }));
    expect(both.changes.map((c) => c.path)).toEqual(["$.n", "$.note"]);
    const sideBySide = await runRabbitInbox(["quarantine", "diff", String(third!.id)], env);
    expect(sideBySide.code).toBe(0);
    expect(sideBySide.stdout).toMatch(/"n": 150,?\s+\|\s+"n": 175/);
    expect(sideBySide.stdout).toMatch(/\s>\s+"note": "again"/);

    const discarded = await runRabbitInbox(["quarantine", "discard", String(invalid!.id), "--reason", "garbage from a test tool", "--actor", "ops-alice"], env);
    expect(discarded.code).toBe(0);
    expect(discarded.stdout).toMatch(new RegExp(`^discarded quarantine entry #${invalid!.id} \\(audit #\\d+ by ops-alice\\)`));
    const audit = await f.rows(`SELECT quarantine_id, action, actor, reason, at FROM rabbit_inbox_quarantine_audit WHERE quarantine_id = ${invalid!.id}`);
    expect(audit).toEqual([expect.objectContaining({ action: "discard", actor: "ops-alice", reason: "garbage from a test tool" })]);
    expect(audit[0]!.at).toBeTruthy();
    expect((await f.ops.getQuarantineEntry(invalid!.id))?.status).toBe("discarded");
    expect((await rabbitInboxJson<Listed[]>(["quarantine", "list"], env)).map((e) => e.id)).not.toContain(invalid!.id);
    expect((await rabbitInboxJson<Listed[]>(["quarantine", "list", "--status", "discarded"], env)).map((e) => e.id)).toEqual([invalid!.id]);
    expectOneLineError(await runRabbitInbox(["quarantine", "discard", String(invalid!.id), "--reason", "twice"], env), 3, /was discarded \(audit #\d+ by ops-alice at /);
    const shownAudit = await rabbitInboxJson<{ audit: Array<{ action: string; actor: string }> }>(["quarantine", "show", String(invalid!.id)], env);
    expect(shownAudit.audit).toEqual([expect.objectContaining({ action: "discard", actor: "ops-alice" })]);
  });

  it("quarantine replay republishes to the original queue with confirms and records who, when and why; a failed publish puts the entry back", async () => {
    const f = await retentionFixture(kind);
    const queue = `ri.test.replay.${randomBytes(4).toString("hex")}`;
    cleanups.push(() => deleteQueues(queue));
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    const env = { DATABASE_URL: f.url };
    const pipeline = f.pipeline();
    const stamped = new Date(Date.now() - 30_000);
    await pipeline.process([delivery(event("x-1", { n: 1 }), { queue, timestamp: stamped })]);
    await pipeline.process([delivery(event("x-1", { n: 2 }), { queue, timestamp: stamped })]); // conflict
    const [entry] = await f.ops.listQuarantineEntries();

    const run = await runRabbitInbox(["quarantine", "replay", String(entry!.id), "--reason", "see if it still conflicts", "--actor", "ops-bob"], env);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/^note: entry #\d+ is a conflict: without --accept-new the replay will conflict again/);
    expect(run.stdout).toMatch(new RegExp(`^replayed quarantine entry #${entry!.id} to queue ${queue.replaceAll(".", "\\.")} \\(confirmed; audit #\\d+ by ops-bob\\)`));
    const [message] = await drainQueue(queue);
    expect(JSON.parse(message!.content.toString())).toEqual(event("x-1", { n: 2 }));
    expect(message!.properties.timestamp).toBe(Math.floor(stamped.getTime() / 1000));
    expect(message!.properties.headers?.["x-rabbit-inbox-replay-of"]).toBe(entry!.id);
    const [audit] = await f.ops.quarantineAudit(entry!.id);
    expect(audit).toMatchObject({ action: "replay", actor: "ops-bob", reason: "see if it still conflicts", failure: null });
    expect(audit!.publishedAt).not.toBeNull();
    expect((await f.ops.getQuarantineEntry(entry!.id))?.status).toBe("replayed");

    // The replay goes through the normal pipeline: still a conflict, held again.
    await pipeline.process([delivery(event("x-1", { n: 2 }), { queue, timestamp: stamped })]);
    expect(await f.ops.getQuarantineEntry(entry!.id)).toMatchObject({ status: "held", occurrences: 2 });

    // Its queue is gone: the broker returns the message, nothing is lost, the entry stays held.
    await deleteQueues(queue);
    const failed = await runRabbitInbox(["quarantine", "replay", String(entry!.id), "--accept-new", "--reason", "new wins"], env);
    expect(failed.code).toBe(1);
    expect(failed.stderr.trim().split("\n").at(-1)).toMatch(/^rabbit-inbox: republishing quarantine entry #\d+ to ".*" failed \(.*unroutable.*\); the entry is held again$/);
    expect((await f.ops.getQuarantineEntry(entry!.id))?.status).toBe("held");
    const audits = await f.ops.quarantineAudit(entry!.id);
    expect(audits[1]).toMatchObject({ action: "replay", options: "accept-new", publishedAt: null });
    expect(audits[1]!.failure).toMatch(/unroutable/);
    expect(await f.rows("SELECT id FROM rabbit_inbox_replay_grant WHERE used_at IS NULL")).toEqual([]);
  });

  it("doctor: schema and topology checks, each problem with its fix", async () => {
    const f = await retentionFixture(kind);
    const queue = `ri.test.doctor.${randomBytes(4).toString("hex")}`;
    cleanups.push(() => deleteQueues(queue, `${queue}.quarantine`));
    const env = { DATABASE_URL: f.url };

    const missing = await runRabbitInbox(["doctor", "--queue", queue], env);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/^ok\s+schema: .*up to date$/m);
    expect(missing.stdout).toMatch(new RegExp(`^FAIL\\s+work queue: queue "${queue.replaceAll(".", "\\.")}" does not exist\\n\\s+fix: .*declareTopology`, "m"));
    expect(missing.stdout).toMatch(/^FAIL\s+quarantine queue: .*\n\s+fix: /m);
    expect(missing.stdout).toMatch(/2 problems found/);

    await withChannel(async (ch) => {
      await ch.assertQueue(queue, { durable: true });
      await ch.assertQueue(`${queue}.quarantine`, { durable: true });
    });
    const ok = await rabbitInboxJson<{ ok: boolean; checks: Array<{ check: string; status: string; detail: string }> }>(["doctor", "--queue", queue], env);
    expect(ok.ok).toBe(true);
    // Without --amqp-url the command checks the broker the tests use (TEST_AMQP_URL), where the queues were declared.
    expect(ok.checks.find((c) => c.check === "broker")?.detail).toBe(`connected to ${brokerNodeLabel(amqpUrl)}`);
    expect(ok.checks.map((c) => [c.check, c.status])).toEqual([
      ["schema", "ok"], ["database writes", "ok"], ["quarantine", "ok"], ["outbox", "ok"], ["broker", "ok"], ["work queue", "warn"], ["quarantine queue", "ok"],
    ]);

    const noBroker = await runRabbitInbox(["doctor", "--queue", queue, "--amqp-url", "amqp://guest:sesame@127.0.0.1:1"], env);
    expect(noBroker.code).toBe(1);
    expect(noBroker.stdout).toMatch(/^FAIL\s+broker: cannot connect to amqp:\/\/guest:\*\*\*@127\.0\.0\.1:1/m);
    expect(noBroker.stdout + noBroker.stderr).not.toContain("sesame");

    const unmigrated = await emptyDatabase(kind);
    if (kind === "sqlite") await import("better-sqlite3").then(({ default: Database }) => new Database(unmigrated).close());
    const bare = await runRabbitInbox(["doctor"], { DATABASE_URL: unmigrated });
    expect(bare.code).toBe(1);
    expect(bare.stdout).toMatch(/^FAIL\s+schema: .*no rabbit-inbox tables\n\s+fix: rabbit-inbox migrate/m);
    expect(bare.stdout).toMatch(/^WARN\s+broker: topology not checked\n\s+fix: pass --queue/m);
  });

  it("doctor reports the outbox backlog: its size and age, a stale backlog as a warning, unroutable rows as a problem", async () => {
    const f = await retentionFixture(kind);
    const env = { DATABASE_URL: f.url };
    const outbox = outboxTableAt(f.url);
    const ago = (ms: number) => (kind === "postgres" ? `now() - interval '${ms} milliseconds'`
      : kind === "mysql" ? `UTC_TIMESTAMP(6) - INTERVAL ${ms * 1000} MICROSECOND` : String(Date.now() - ms));
    const write = (id: string, age: number, failure?: { attempts: number; error: string }) => outbox.exec(
      `INSERT INTO rabbit_inbox_outbox (message_id, exchange, routing_key, body, properties, created_at, available_at, attempts, last_error)
       VALUES ('${id}', 'ledger.balance-changed', 'acct', ${kind === "postgres" ? "'\\x00'::bytea" : "X'00'"}, '{}', ${ago(age)}, ${ago(age)},
         ${failure?.attempts ?? 0}, ${failure ? `'${failure.error}'` : "NULL"})`);
    const outboxCheck = async () => (await rabbitInboxJson<{ ok: boolean; checks: Array<{ check: string; status: string; detail: string; fix?: string }> }>(["doctor"], env))
      .checks.find((c) => c.check === "outbox");

    expect(await outboxCheck()).toEqual({ check: "outbox", status: "ok", detail: "nothing waiting to be published" });

    await write("fresh", 2_000);
    expect(await outboxCheck()).toMatchObject({ status: "ok", detail: expect.stringMatching(/^1 unsent message, the oldest written \d+s ago$/) as string });

    await write("stale", 3_600_000);
    const stale = await outboxCheck();
    expect(stale).toMatchObject({ status: "warn", detail: expect.stringMatching(/^2 unsent messages, the oldest written (59m\d*s?|1h\d*s?) ago$/) as string });
    expect(stale?.fix).toMatch(/outbox relay/);

    await write("returned", 600_000, { attempts: 3, error: 'message to "acct" on exchange "ledger.balance-changed" was unroutable (no queue bound)' });
    const run = await runRabbitInbox(["doctor"], env);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^FAIL\s+outbox: 3 unsent messages, the oldest written .* ago; 1 failed to publish \(1 unroutable\); worst: exchange "ledger\.balance-changed", routing key "acct", 3 attempts, last error: .*unroutable/m);
    expect(run.stdout).toMatch(/^\s+fix: bind a queue to exchange "ledger\.balance-changed", routing key "acct"/m);
    expect(run.stdout).toMatch(/1 problem found/);
    expect(run.stdout).not.toMatch(/no problems found/);
  });
});
