/**
 * The bulk forms of `rabbit-inbox quarantine` as a subprocess against a real PostgreSQL schema,
 * MariaDB database or SQLite file and the real broker: groups, a bulk replay that refuses
 * without --yes (saying how many entries it would touch), its dry run, the run itself, a bulk
 * discard by group, and clear usage errors.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { PermanentEventError } from "../../src/core/errors.js";
import { deleteQueues, drainQueue, withChannel } from "../support/broker.js";
import { rabbitInboxJson, runRabbitInbox, CLI_TEST_TIMEOUT_MS } from "../support/rabbit-inbox-cli.js";
import { HANDLER, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES } from "../support/test-databases.js";
import { BULK_KEYS, GROUP_KEYS, keysOf } from "../support/quarantine-json-keys.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

type Group = { key: string; handler: string; reason: string; entries: number; cause: string; first_seen: string; last_seen: string };
type Result = { dry_run: boolean; selected: number; by_reason: Record<string, number>; done: number; skipped: Array<{ id: number; why: string }>; failed: unknown[]; resumed: number; stopped: string | null };

describe.each(TEST_DATABASES)("rabbit-inbox quarantine bulk forms on %s", (kind) => {
  it("groups; replay by filter refuses without --yes, dry-runs, replays with --yes; discard by group; usage errors", async () => {
    const f = await retentionFixture(kind);
    const queue = `ri.test.cli-bulk.${randomBytes(4).toString("hex")}`;
    cleanups.push(() => deleteQueues(queue));
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    const env = { DATABASE_URL: f.url };
    const refusing = (reason: string, detail: (e: Record<string, unknown>) => string) => f.pipeline({
      handler: { name: HANDLER, handle(e: Record<string, unknown>) { return Promise.reject(new PermanentEventError(reason, detail(e))); } },
    });
    const missing = refusing("account_missing", (e) => `account "acc-${String(e.event_id)}" was never opened`);
    for (const id of ["m-1", "m-2", "m-3"]) await missing.process([delivery(event(id, { n: 1 }), { queue })]);
    const over = refusing("over_limit", (e) => `amount ${Number(e.n)} exceeds the limit`);
    for (const [id, n] of [["o-1", 20], ["o-2", 30]] as const) await over.process([delivery(event(id, { n }), { queue })]);
    const pipeline = f.pipeline();
    await pipeline.process([delivery(event("c-1", { n: 1 }), { queue })]);
    await pipeline.process([delivery(event("c-1", { n: 2 }), { queue })]); // conflict

    const groups = await rabbitInboxJson<Group[]>(["quarantine", "groups"], env);
    expect(groups.map(keysOf)).toEqual([GROUP_KEYS, GROUP_KEYS, GROUP_KEYS]);
    expect(groups.map((g) => [g.reason, g.entries, g.cause])).toEqual([
      ["account_missing", 3, 'account "…" was never opened'], ["over_limit", 2, "amount <n> exceeds the limit"], ["conflict", 1, expect.any(String)],
    ]);
    const table = await runRabbitInbox(["quarantine", "groups", "--reason", "over_limit"], env);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`^key\\s+handler\\s+reason\\s+status\\s+entries\\s+first_seen\\s+last_seen\\s+cause\\n${groups[1]!.key}\\s+${HANDLER}\\s+over_limit\\s+held\\s+2\\s`));

    // No --yes: nothing happens, and the command says how many entries it would touch.
    const refused = await runRabbitInbox(["quarantine", "replay", "--text", "never opened", "--reason", "accounts opened"], env);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe("");
    expect(refused.stderr).toMatch(/^rabbit-inbox: this would replay 3 quarantine entries \(selected: account_missing 3\): add --yes to go ahead, or --dry-run to see the details\n$/);
    const all = await runRabbitInbox(["quarantine", "replay", "--all", "--reason", "everything"], env);
    expect(all.stderr).toMatch(/this would replay 5 quarantine entries \(selected: account_missing 3, conflict 1, over_limit 2; 1 skipped\)/);
    expect(await drainQueue(queue)).toEqual([]);
    expect(await f.ops.listQuarantineEntries({ status: "replayed" })).toEqual([]);

    const dry = await rabbitInboxJson<Result>(["quarantine", "replay", "--all", "--dry-run"], env);
    expect(dry).toMatchObject({ dry_run: true, selected: 6, by_reason: { account_missing: 3, over_limit: 2, conflict: 1 }, done: 5, failed: [], resumed: 0 });
    expect(keysOf(dry)).toEqual(BULK_KEYS);
    expect(dry.skipped).toEqual([expect.objectContaining({ why: expect.stringMatching(/^a conflict/) as string })]);
    const dryText = await runRabbitInbox(["quarantine", "replay", "--all", "--dry-run"], env);
    expect(dryText.stdout).toMatch(/^dry run: would replay 5 of 6 selected entries \(account_missing 3, conflict 1, over_limit 2\)\nskipped #\d+: a conflict: /);
    expect(await drainQueue(queue)).toEqual([]);

    const run = await runRabbitInbox(["quarantine", "replay", "--text", "never opened", "--reason", "accounts opened", "--actor", "ops-gus", "--rate", "50", "--yes"], env);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("replayed 3 of 3 selected entries (account_missing 3)\n");
    expect((await drainQueue(queue)).map((m) => (JSON.parse(m.content.toString()) as { event_id: string }).event_id).sort()).toEqual(["m-1", "m-2", "m-3"]);
    const replayed = await f.ops.listQuarantineEntries({ status: "replayed" });
    expect(replayed).toHaveLength(3);
    for (const e of replayed) expect(await f.ops.quarantineAudit(e.id)).toEqual([expect.objectContaining({ action: "replay", actor: "ops-gus", reason: "accounts opened", failure: null })]);
    const again = await rabbitInboxJson<Result>(["quarantine", "replay", "--text", "never opened", "--reason", "accounts opened", "--yes"], env);
    expect(again).toMatchObject({ selected: 0, done: 0 });
    expect(await drainQueue(queue)).toEqual([]);

    const discarded = await rabbitInboxJson<Result>(["quarantine", "discard", "--group", groups[1]!.key, "--reason", "obsolete", "--yes"], env);
    expect(discarded).toMatchObject({ selected: 2, done: 2, by_reason: { over_limit: 2 } });
    expect((await f.ops.listQuarantineEntries({ status: "discarded" })).map((e) => e.eventId).sort()).toEqual(["o-1", "o-2"]);
    expect((await f.ops.listQuarantineEntries()).map((e) => e.reason)).toEqual(["conflict"]);

    // In replay and discard, --reason is the operator's why: the quarantine reason is --quarantine-reason.
    expect(await rabbitInboxJson<Result>(["quarantine", "discard", "--quarantine-reason", "conflict", "--reason", "x", "--dry-run"], env))
      .toMatchObject({ dry_run: true, selected: 1, by_reason: { conflict: 1 }, done: 1 });

    const usage = async (args: string[], pattern: RegExp) => {
      const r = await runRabbitInbox(args, env);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(pattern);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
    };
    await usage(["quarantine", "replay"], /give an entry id, or select the entries to replay with filter flags .* or --all/);
    await usage(["quarantine", "replay", "3", "--reason", "x", "--quarantine-reason", "conflict"], /give one entry id, or select entries with filter flags or --all; not both/);
    await usage(["quarantine", "replay", "--all", "--yes"], /a bulk replay needs a --reason/);
    await usage(["quarantine", "replay", "--all", "--reason", "x", "--rate", "fast"], /--rate must be a positive number of replays per second, got "fast"/);
    await usage(["quarantine", "replay", "--since", "last week", "--reason", "x"], /--since takes an ISO time .* got "last week"/);
    await usage(["quarantine", "discard", "--group", "nope", "--reason", "x"], /--group must be a group key/);
    await usage(["quarantine", "discard", "--all", "--handler", HANDLER, "--reason", "x"], /leave out the filter flags, or --all/);
    await usage(["quarantine", "list", "--until", "2026-99-01"], /--until takes an ISO time/);
    // A time the database would refuse (PostgreSQL: "timestamp out of range") is a usage error first.
    await usage(["quarantine", "list", "--since", "99999999d"], /^rabbit-inbox: --since "99999999d" is out of range: times run from 0001-01-01 to 9999-12-31/);
    await usage(["quarantine", "groups", "--until", "99999999d"], /^rabbit-inbox: --until "99999999d" is out of range/);
    await usage(["quarantine", "discard", "--since", "99999999d", "--reason", "x", "--dry-run"], /--since "99999999d" is out of range/);
    await usage(["quarantine", "replay", "--all", "--reason", "x", "--concurrency", "65"], /--concurrency takes 1 to 64, got 65/);
    await usage(["quarantine", "replay", "--all", "--reason", "x", "--resume-after", "soon"], /--resume-after takes a duration/);
    await usage(["quarantine", "replay", "--all", "--reason", "x", "--again"], /--again replays one entry \(give its id\): a bulk replay selects held entries only/);
    await usage(["quarantine", "replay", "1", "--again"], /--again overrides a safety check: give the --reason/);
    expect((await f.ops.listQuarantineEntries()).map((e) => e.reason)).toEqual(["conflict"]);
  }, CLI_TEST_TIMEOUT_MS);
});
