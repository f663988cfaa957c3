/**
 * A bulk replay of 10,000 quarantined events, rate-limited, run as the real `rabbit-inbox`
 * process against PostgreSQL and the real broker, killed with SIGKILL mid-way, a consumer taking
 * what reached the broker, then run again to completion. Proven: every entry has exactly one
 * audit record, confirmed; the broker got every event exactly once (the second run finishes the
 * replays in flight at the kill: one the consumer already applied is only marked confirmed, one
 * that never reached the broker is sent); every event is applied exactly once.
 */
import { randomBytes } from "node:crypto";
import type { ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import type { IncomingMessage } from "../../src/core/pipeline.js";
import { fingerprintOf } from "../../src/core/fingerprint.js";
import { quarantineGroups } from "../../src/operations.js";
import { amqpUrl, deleteQueues, messagesReady, withChannel } from "../support/broker.js";
import { runRabbitInbox, spawnRabbitInbox } from "../support/rabbit-inbox-cli.js";
import { HANDLER, delivery, retentionFixture } from "../support/retention-fixture.js";
import { onSelectedDatabases } from "../support/test-databases.js";

const EVENTS = 10_000;
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

type Result = { selected: number; done: number; resumed: number; skipped: unknown[]; failed: unknown[]; stopped: string | null };

describe.each(onSelectedDatabases(["postgres"] as const))("bulk replay killed mid-way on %s", (kind) => {
  it(`10,000 events: killed with SIGKILL, run again: each replayed once, audited once, applied once`, async () => {
    const f = await retentionFixture(kind);
    const queue = `ri.test.bulk-crash.${randomBytes(4).toString("hex")}`;
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    cleanups.push(() => deleteQueues(queue));

    // 10,000 entries as the consumer writes them (an account that was missing), in one statement,
    // each with the fingerprint the pipeline gives its body.
    const fingerprints = Array.from({ length: EVENTS }, (_, i) => `'${fingerprintOf({ tenant: "t1", event_id: `k-${i + 1}`, n: i + 1 })}'`);
    await f.rows(`INSERT INTO rabbit_inbox_quarantine (handler, dedup_key, tenant, event_id, reason, detail, fingerprint, body, body_truncated, body_sha256, properties, queue)
      SELECT '${HANDLER}', 'event:k-' || g, 't1', 'k-' || g, 'account_missing', 'account "a-' || g || '" was never opened', fp,
        convert_to(json_build_object('tenant', 't1', 'event_id', 'k-' || g, 'n', g)::text, 'UTF8'), false, md5(g::text),
        '{"properties":{"contentType":"application/json"}}', '${queue}'
      FROM unnest(ARRAY[${fingerprints.join(",")}]::text[]) WITH ORDINALITY AS t(fp, g)`);
    // 10,000 different error texts make one group, read in one aggregate query.
    let t = performance.now();
    const [group, ...others] = await quarantineGroups(f.ops);
    const groupsMs = performance.now() - t;
    expect(others).toEqual([]);
    expect(group).toMatchObject({ reason: "account_missing", entries: EVENTS, cause: 'account "…" was never opened' });
    t = performance.now();
    const lastPage = await f.ops.listQuarantineEntries({ group: group!.key, afterId: EVENTS - 150, limit: 100 });
    const groupPageMs = performance.now() - t;
    expect(lastPage).toHaveLength(100);
    const env = { DATABASE_URL: f.url, AMQP_URL: amqpUrl };
    const args = ["quarantine", "replay", "--quarantine-reason", "account_missing", "--reason", "accounts opened", "--actor", "ops-crash",
      "--rate", "1000", "--concurrency", "8", "--resume-after", "0s", "--yes", "--json"];
    const count = async (sql: string) => Number((await f.rows(sql))[0]!.n);

    const child: ChildProcess = spawnRabbitInbox(args, env);
    const exited = new Promise<NodeJS.Signals | null>((done) => child.once("close", (_code, signal) => done(signal)));
    cleanups.push(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      return Promise.resolve();
    });
    const started = Date.now();
    // The command's start, then 1,000 a second: with the whole suite running alongside, that
    // has taken twice as long as alone and more.
    while (await count("SELECT count(*) AS n FROM rabbit_inbox_quarantine_audit") < 5_000) {
      if (child.exitCode !== null || Date.now() - started > 120_000) throw new Error(`the bulk replay did not get to 5,000 entries (exit ${child.exitCode})`);
      await sleep(20);
    }
    const killedAt = Date.now();
    child.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");

    const audited = await count("SELECT count(*) AS n FROM rabbit_inbox_quarantine_audit");
    const inFlight = await f.rows("SELECT q.event_id FROM rabbit_inbox_quarantine_audit a JOIN rabbit_inbox_quarantine q ON q.id = a.quarantine_id WHERE a.published_at IS NULL AND a.failure IS NULL");
    expect(audited).toBeGreaterThanOrEqual(5_000);
    expect(audited).toBeLessThan(EVENTS);
    expect(await count("SELECT count(*) AS n FROM rabbit_inbox_quarantine WHERE status = 'held'")).toBe(EVENTS - audited);

    // A consumer runs meanwhile, as in production: it applies what reached the broker before
    // the kill, in-flight replays included.
    const pipeline = f.pipeline();
    const outcomes: Record<string, number> = {};
    const perEvent = new Map<string, number>();
    const consumeAll = async () => {
      await sleep(300); // publishes the broker was still taking in when the process died
      const bodies = await takeAll(queue, await messagesReady(queue));
      for (const body of bodies) {
        const id = (JSON.parse(body.toString()) as { event_id: string }).event_id;
        perEvent.set(id, (perEvent.get(id) ?? 0) + 1);
      }
      for (let i = 0; i < bodies.length; i += 500) {
        const batch: IncomingMessage[] = bodies.slice(i, i + 500).map((b) => delivery(JSON.parse(b.toString()) as object, { queue }));
        for (const o of await pipeline.process(batch)) outcomes[o.kind] = (outcomes[o.kind] ?? 0) + 1;
      }
      return bodies.length;
    };
    const beforeRerun = await consumeAll();

    const rerunAt = Date.now();
    const again = await runRabbitInbox(args, env, { timeoutMs: 120_000 });
    const rerunMs = Date.now() - rerunAt;
    expect(again.stderr).toBe("");
    expect(again.code).toBe(0);
    const result = JSON.parse(again.stdout) as Result;
    expect(result).toMatchObject({ selected: EVENTS - audited, done: EVENTS - audited, resumed: inFlight.length, skipped: [], failed: [], unconfirmed: 0, stopped: null });

    // The audit: one record per entry, each confirmed, none failed; every entry replayed.
    expect(await count("SELECT count(*) AS n FROM rabbit_inbox_quarantine_audit")).toBe(EVENTS);
    expect(await count("SELECT count(DISTINCT quarantine_id) AS n FROM rabbit_inbox_quarantine_audit")).toBe(EVENTS);
    expect(await count("SELECT count(*) AS n FROM rabbit_inbox_quarantine_audit WHERE published_at IS NULL OR failure IS NOT NULL OR actor <> 'ops-crash'")).toBe(0);
    expect(await count("SELECT count(*) AS n FROM rabbit_inbox_quarantine WHERE status <> 'replayed'")).toBe(0);

    // The broker got every event exactly once: an in-flight replay the consumer had applied was
    // only marked confirmed; one that never reached the broker was sent by the second run.
    const consumeAt = Date.now();
    const afterRerun = await consumeAll();
    expect(beforeRerun + afterRerun).toBe(EVENTS);
    expect(perEvent.size).toBe(EVENTS);
    expect([...perEvent.values()].every((n) => n === 1)).toBe(true);
    // Each event applied once.
    expect(outcomes).toEqual({ applied: EVENTS });
    expect(await count("SELECT count(*) AS n FROM effects")).toBe(EVENTS);
    expect(await count("SELECT count(DISTINCT event_id) AS n FROM effects")).toBe(EVENTS);
    console.info(`bulk replay crash: killed after ${audited} audit records (${killedAt - started} ms), ${inFlight.length} in flight, ${beforeRerun} consumed before the second run; `
      + `the second run took ${rerunMs} ms, the consumer ${Date.now() - consumeAt} ms; groups over 10,000 entries ${Math.round(groupsMs)} ms, a page of a group ${Math.round(groupPageMs)} ms`);
  }, 240_000);
});

/** Every message of the queue's `total`, taken with a prefetching consumer (a get per message would take long for 10,000). */
async function takeAll(queue: string, total: number): Promise<Buffer[]> {
  return withChannel(async (ch) => {
    const bodies: Buffer[] = [];
    await ch.prefetch(1000);
    let consumerTag = "";
    await new Promise<void>((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`took ${bodies.length} of ${total} messages`)), 30_000);
      // A delivery past `total` stays unacked: the channel's close gives it back to the queue.
      ch.consume(queue, (m) => {
        if (!m || bodies.length >= total) return;
        bodies.push(m.content);
        ch.ack(m);
        if (bodies.length === total) {
          clearTimeout(timer);
          done();
        }
      }).then((ok) => { consumerTag = ok.consumerTag; }, fail);
    });
    // The channel closes before the connection: a connection's Close could overtake acks still
    // buffered on the channel, and the broker would deliver those messages again.
    await ch.cancel(consumerTag);
    await ch.close();
    return bodies;
  });
}
