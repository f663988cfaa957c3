/**
 * One decision at a time per quarantine entry, on PostgreSQL, MariaDB and SQLite with the real
 * broker: concurrent replays through the console (and the command and the console at once) give
 * one replay, one audit record and one publish, the others a 409 / exit code 3 naming the replay
 * under way or done; an entry replayed and applied cannot be replayed or discarded; one replayed
 * but not applied yet is replayed again only when asked; after accept-new the command tells the
 * truth about the stored version.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { PermanentEventError } from "../../src/core/errors.js";
import { amqpUrl, deleteQueues, drainQueue, withChannel } from "../support/broker.js";
import { TEST_TOKEN, startConsole } from "../support/console-server.js";
import { runRabbitInbox } from "../support/rabbit-inbox-cli.js";
import { HANDLER, type RetentionFixture, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES, type TestDatabaseKind } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const bearer = { authorization: `Bearer ${TEST_TOKEN}` };
const post = (body: unknown) => ({ method: "POST", headers: { "content-type": "application/json", ...bearer }, body: JSON.stringify(body) });

async function freshQueue(): Promise<string> {
  const queue = `ri.test.exclusive.${randomBytes(4).toString("hex")}`;
  await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
  cleanups.push(() => deleteQueues(queue));
  return queue;
}

/** A held entry with an event key that applies once replayed (its handler refused it the first time). */
async function refusedOnce(f: RetentionFixture, queue: string, id = "m-1"): Promise<number> {
  const refusing = f.pipeline({ handler: { name: HANDLER, handle: () => Promise.reject(new PermanentEventError("account_missing", "no account yet")) } });
  await refusing.process([delivery(event(id, { n: 1 }), { queue })]);
  const entry = (await f.ops.listQuarantineEntries()).find((e) => e.eventId === id);
  return entry!.id;
}

/** What a consumer does with the replayed messages waiting on the queue: each goes through the pipeline. */
async function consume(f: RetentionFixture, queue: string): Promise<string[]> {
  const outcomes: string[] = [];
  for (const m of await drainQueue(queue)) {
    const [o] = await f.pipeline().process([delivery(JSON.parse(m.content.toString()) as object, { queue })]);
    outcomes.push(o!.kind);
  }
  return outcomes;
}

/** A database with one such entry, its queue, and a console over it that replays to the real broker. */
async function replayableEntry(kind: TestDatabaseKind) {
  const f = await retentionFixture(kind);
  const queue = await freshQueue();
  const id = await refusedOnce(f, queue);
  return { f, queue, id, c: await startConsole({ store: f.store, token: TEST_TOKEN, amqpUrl }) };
}

const cli = (f: RetentionFixture, args: string[]) => runRabbitInbox(["quarantine", ...args], { DATABASE_URL: f.url, AMQP_URL: amqpUrl });

describe.each(TEST_DATABASES)("quarantine decisions are exclusive on %s", (kind) => {
  it("five concurrent replays through the console: one replay, one audit record, one publish; the others 409 naming it", async () => {
    const { f, queue, id, c } = await replayableEntry(kind);

    const answers = await Promise.all(Array.from({ length: 5 }, () => c.call(`/api/quarantine/${id}/replay`, post({ reason: "race" }))));
    const bodies = await Promise.all(answers.map(async (r) => ({ status: r.status, body: (await r.json()) as { audit?: { id: number; published_at: string | null }; error?: string } })));
    const won = bodies.filter((b) => b.status === 200);
    expect(won).toHaveLength(1);
    expect(bodies.filter((b) => b.status === 409)).toHaveLength(4);
    const audit = won[0]!.body.audit!;
    // Answered once the broker confirmed, as the docs say: published_at is set.
    expect(audit.published_at).not.toBeNull();
    for (const lost of bodies.filter((b) => b.status === 409)) {
      expect(lost.body.error).toMatch(new RegExp(`^quarantine entry #${id} (is being replayed|was replayed) \\(audit #${audit.id} by console:api at `));
    }
    expect(await f.ops.quarantineAudit(id)).toHaveLength(1);
    expect(await drainQueue(queue)).toHaveLength(1);
  });

  it("the command and the console at once: exactly one replay; the command's refusal exits 3 and says which decision", async () => {
    const { f, queue, id, c } = await replayableEntry(kind);

    const [runs, answers] = await Promise.all([
      Promise.all([1, 2, 3].map(() => cli(f, ["replay", String(id), "--reason", "race"]))),
      Promise.all([1, 2, 3].map(() => c.call(`/api/quarantine/${id}/replay`, post({ reason: "race" })))),
    ]);
    const succeeded = runs.filter((r) => r.code === 0).length + answers.filter((r) => r.status === 200).length;
    expect(succeeded, JSON.stringify(runs)).toBe(1);
    for (const run of runs.filter((r) => r.code !== 0)) {
      expect(run.code, run.stderr).toBe(3);
      expect(run.stderr).toMatch(new RegExp(`^rabbit-inbox: quarantine entry #${id} (is being replayed|was replayed) \\(audit #\\d+ by `));
    }
    expect(answers.filter((r) => r.status !== 200).map((r) => r.status)).toEqual(answers.filter((r) => r.status !== 200).map(() => 409));
    expect(await f.ops.quarantineAudit(id)).toHaveLength(1);
    expect(await drainQueue(queue)).toHaveLength(1);
  });

  it("replayed and applied: replay and discard are refused; replayed, not applied yet: discard refused, a replay only with again", async () => {
    const { f, queue, id, c } = await replayableEntry(kind);
    expect((await c.call(`/api/quarantine/${id}/replay`, post({ reason: "first" }))).status).toBe(200);

    // The message is on its way: the entry is replayed, the inbox has not applied it yet.
    const { cookie } = await c.login(TEST_TOKEN);
    const page = async () => (await c.call(`/entries/${id}`, { headers: { cookie } })).text();
    const onItsWay = await page();
    expect(onItsWay).toContain(`Replay entry #${id} again`);
    expect(onItsWay).not.toContain(`/entries/${id}/discard`);
    const discard = await c.call(`/api/quarantine/${id}/discard`, post({ reason: "give up" }));
    expect(discard.status).toBe(409);
    expect(((await discard.json()) as { error: string }).error).toMatch(/was replayed .*not applied yet.*cannot be discarded/);
    const plain = await c.call(`/api/quarantine/${id}/replay`, post({ reason: "again?" }));
    expect(plain.status).toBe(409);
    expect(((await plain.json()) as { error: string }).error).toMatch(/not applied yet.*again/);
    const cliPlain = await cli(f, ["replay", String(id)]);
    expect(cliPlain.code).toBe(3);
    expect(cliPlain.stderr).toMatch(/not applied yet: .*--again/);
    expect(await f.ops.quarantineAudit(id)).toHaveLength(1);

    // The first copy was lost (say the queue was purged): replaying again is a decision of its own.
    await drainQueue(queue);
    const again = await cli(f, ["replay", String(id), "--again", "--reason", "the first copy was purged"]);
    expect(again.code, again.stderr).toBe(0);
    expect(await f.ops.quarantineAudit(id)).toHaveLength(2);

    expect(await consume(f, queue)).toEqual(["applied"]);
    expect((await f.effects()).get("m-1")).toBe(1);
    for (const [args, refusal] of [
      [["replay", String(id)], /replayed .*and applied: the inbox holds this version/],
      [["replay", String(id), "--again", "--reason", "x"], /replayed .*and applied: the inbox holds this version/],
      [["discard", String(id), "--reason", "x"], /replayed .*and applied: .*discarding it would mark an applied event discarded/],
    ] as const) {
      const run = await cli(f, [...args]);
      expect(run.code, run.stderr).toBe(3);
      expect(run.stderr).toMatch(refusal);
    }
    const applied = await page();
    expect(applied).toMatch(/This entry was replayed .*audit #\d+.* and applied: the inbox holds this version/);
    expect(applied).not.toMatch(new RegExp(`/entries/${id}/(replay|discard)`));
    const api = await c.call(`/api/quarantine/${id}/replay`, post({ reason: "x", again: true }));
    expect(api.status).toBe(409);
    expect((await f.ops.getQuarantineEntry(id))?.status).toBe("replayed");
    expect(await f.ops.quarantineAudit(id)).toHaveLength(2);
    expect(await drainQueue(queue)).toEqual([]);
  });

  it("after accept-new, a plain replay does not claim it would conflict again, and show lists the current stored fingerprint", async () => {
    const f = await retentionFixture(kind);
    const queue = await freshQueue();
    const p = f.pipeline();
    await p.process([delivery(event("c-1", { n: 1 }), { queue })]);
    await p.process([delivery(event("c-1", { n: 2 }), { queue })]);
    const [conflict] = await f.ops.listQuarantineEntries({ reason: "conflict" });
    const before = await cli(f, ["replay", String(conflict!.id)]);
    expect(before.stderr).toMatch(/without --accept-new the replay will conflict again/);
    expect(await consume(f, queue)).toEqual(["quarantined"]);

    const accepted = await cli(f, ["replay", String(conflict!.id), "--accept-new", "--reason", "the producer fixed it"]);
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(await consume(f, queue)).toEqual(["applied"]);
    expect((await f.dedup()).get("c-1")).toBe(conflict!.fingerprint);

    const after = await cli(f, ["replay", String(conflict!.id)]);
    expect(after.stderr).not.toMatch(/conflict again/);
    expect(after.code).toBe(3);
    expect(after.stderr).toMatch(/and applied: the inbox holds this version/);

    const shown = await cli(f, ["show", String(conflict!.id)]);
    expect(shown.stdout).toMatch(new RegExp(`current_fingerprint +${conflict!.fingerprint} \\(this version\\)`));
    const json = JSON.parse((await cli(f, ["show", String(conflict!.id), "--json"])).stdout) as Record<string, unknown>;
    expect(json).toMatchObject({ stored_fingerprint: conflict!.storedFingerprint, current_fingerprint: conflict!.fingerprint });
  });
});
