/**
 * The operator's quarantine workflow against the running ledger (real broker, real database,
 * real processes): an `account_missing` event replayed after the account is opened is applied
 * exactly once (a second replay is refused: the inbox holds that version); a conflict replayed with --accept-new replaces
 * the stored version and applies the new one; a discard keeps its audit row.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { readLedgerTables } from "../../examples/ledger/driver/ledger-tables.js";
import { publishAll } from "../support/broker.js";
import { createEmptyDatabase } from "../support/databases.js";
import { LedgerService, ledgerTopology, rabbitInboxJson, runRabbitInbox, CLI_TEST_TIMEOUT_MS } from "../support/rabbit-inbox-cli.js";
import { TEST_DATABASES } from "../support/test-databases.js";
import { AUDIT_KEYS, keysOf } from "../support/quarantine-json-keys.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const opened = (id: string, account: string) => ({ type: "account.opened", tenant: "t1", event_id: id, account_id: account });
const adjusted = (id: string, account: string, delta: number) => ({ type: "balance.adjusted", tenant: "t1", event_id: id, account_id: account, delta_cents: delta });

interface Entry { id: number; reason: string; status: string; event_id: string | null; occurrences: number }
interface Shown { status: string; audit: Array<{ action: string; actor: string; reason: string; options: string[]; published_at: string | null }> }

describe.each(TEST_DATABASES)("quarantine replay and discard with the ledger on %s", (kind) => {
  it("replay applies once, accept-new replaces the stored version, discard is audited", async () => {
    const database = await createEmptyDatabase(kind);
    cleanups.push(database.remove);
    const databaseUrl = database.url;
    const queue = `ledger.replay.${randomBytes(4).toString("hex")}`;
    cleanups.push(await ledgerTopology(queue));
    const env = { DATABASE_URL: databaseUrl, RABBIT_INBOX_ACTOR: "ops-carol" };
    // One short delayed retry: e-b1's account never comes, so it is quarantined 50 ms later.
    const ledger = await LedgerService.start({ queue, databaseUrl, env: { LEDGER_RETRY_DELAYS_MS: "50" } });
    const balances = async () => Object.fromEntries((await readLedgerTables(databaseUrl)).accounts.map((a) => [a.account_id, a.balance_cents]));

    await publishAll(queue, [adjusted("e-b1", "b", 70), opened("e-open-a", "a"), adjusted("e-a1", "a", 100)]);
    await ledger.waitForSettled(4); // e-b1 twice: delayed, then quarantined
    expect(ledger.settled()).toMatchObject({ delayed: 1, quarantined: 1 });
    await publishAll(queue, [adjusted("e-a1", "a", 150)]); // same id, other payload
    await ledger.waitForSettled(5);
    const held = await rabbitInboxJson<Entry[]>(["quarantine", "list"], env);
    expect(held.map((e) => [e.reason, e.event_id])).toEqual([["account_missing", "e-b1"], ["conflict", "e-a1"]]);
    const [missing, conflict] = held;

    // The account is opened; the replay goes through the normal pipeline and applies once.
    await publishAll(queue, [opened("e-open-b", "b")]);
    await ledger.waitForSettled(6);
    const replay = await runRabbitInbox(["quarantine", "replay", String(missing!.id), "--reason", "account b opened"], env);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toMatch(/^replayed quarantine entry #\d+ to queue \S+ \(confirmed; audit #\d+ by ops-carol\)/);
    await ledger.waitForSettled(7);
    expect(await balances()).toEqual({ a: 100, b: 70 });
    // Replaying it again is refused: the inbox holds this version, nothing is published.
    const again = await runRabbitInbox(["quarantine", "replay", String(missing!.id), "--reason", "again, by mistake"], env);
    expect(again.code).toBe(3);
    expect(again.stderr).toMatch(/was replayed \(audit #\d+ by ops-carol at .*\) and applied: the inbox holds this version; nothing to replay/);
    expect(await balances()).toEqual({ a: 100, b: 70 });
    const shown = await rabbitInboxJson<Shown>(["quarantine", "show", String(missing!.id)], env);
    expect(shown.status).toBe("replayed");
    expect(shown.audit.map((a) => [a.action, a.actor, a.reason])).toEqual([["replay", "ops-carol", "account b opened"]]);
    expect(shown.audit.every((a) => a.published_at !== null)).toBe(true);

    // The conflict: a plain replay still conflicts.
    expect((await runRabbitInbox(["quarantine", "replay", String(conflict!.id)], env)).code).toBe(0);
    await ledger.waitForSettled(8);
    expect((await rabbitInboxJson<Entry[]>(["quarantine", "list", "--reason", "conflict"], env))[0]).toMatchObject({ id: conflict!.id, status: "held", occurrences: 2 });
    // The operator compensates the stored version (-100), then lets the new version win.
    await publishAll(queue, [adjusted("e-a1-undo", "a", -100)]);
    await ledger.waitForSettled(9);
    const accept = await runRabbitInbox(["quarantine", "replay", String(conflict!.id), "--accept-new", "--reason", "producer corrected the amount to 150"], env);
    expect(accept.code).toBe(0);
    await ledger.waitForSettled(10);
    expect(await balances()).toEqual({ a: 150, b: 70 });
    const storedNow = (await readLedgerTables(databaseUrl)).inbox.find((r) => r.event_id === "e-a1")!.fingerprint;
    const conflictEntry = await rabbitInboxJson<Shown & { fingerprint: string }>(["quarantine", "show", String(conflict!.id)], env);
    expect(storedNow).toBe(conflictEntry.fingerprint);
    expect(conflictEntry.audit.at(-1)).toMatchObject({ action: "replay", options: ["accept-new"] });

    // The old version comes back: now it is the conflicting one. Discarded, with its audit.
    await publishAll(queue, [adjusted("e-a1", "a", 100)]);
    await ledger.waitForSettled(11);
    const [oldAgain] = (await rabbitInboxJson<Entry[]>(["quarantine", "list", "--reason", "conflict"], env)).filter((e) => e.id !== conflict!.id);
    const discard = await runRabbitInbox(["quarantine", "discard", String(oldAgain!.id), "--reason", "superseded by the corrected event"], env);
    expect(discard.code).toBe(0);
    const discarded = await rabbitInboxJson<Shown>(["quarantine", "show", String(oldAgain!.id)], env);
    expect(discarded.status).toBe("discarded");
    expect(discarded.audit).toEqual([expect.objectContaining({ action: "discard", actor: "ops-carol", reason: "superseded by the corrected event", published_at: null })]);
    expect(keysOf(discarded.audit[0])).toEqual(AUDIT_KEYS);
    expect(discarded.audit[0]).toHaveProperty("quarantine_id", oldAgain!.id);
    expect(await balances()).toEqual({ a: 150, b: 70 });
    expect(await rabbitInboxJson<Entry[]>(["quarantine", "list"], env)).toEqual([]);
    expect(await ledger.stop()).toBe(0);
    expect(ledger.logs.filter((l) => l.level === "error" && l.msg !== "payload conflict: same event id, different payload; quarantined, not applied")).toEqual([]);
  }, CLI_TEST_TIMEOUT_MS);
});
