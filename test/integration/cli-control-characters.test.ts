/**
 * A producer cannot write to the operator's terminal: control characters from message bodies,
 * ids, AMQP properties and handler details come out escaped from every human-readable output
 * (`rabbit-inbox quarantine list|show|diff`, `status`, the ledger's listing) and as `\uNNNN` in
 * JSON output, which still parses to the original values. Real broker, the ledger on SQLite.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { cliQuarantine } from "../../examples/ledger/driver/ledger-cli.js";
import { publishAll } from "../support/broker.js";
import { createEmptyDatabase } from "../support/databases.js";
import { type CliRun, LedgerService, ledgerTopology, rabbitInboxJson, runRabbitInbox } from "../support/rabbit-inbox-cli.js";
import { spawn } from "node:child_process";
import { ROOT } from "../support/rabbit-inbox-cli.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/**
 * What a terminal acts on or hides: C0 controls but tab and newline, DEL, C1 controls, bidi
 * controls, zero-width characters; and a combining mark (none of this test's text needs one
 * but its decomposed look-alike id).
 */
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]|\p{M}/u;

const COLOUR = "\x1b[31m";
const TITLE = "\x1b]0;pwned-title\x07";
const CSI8 = "\u009b2J"; // the 8-bit form of ESC [ (clear screen)
const RLO = "\u202e"; // right-to-left override
const SPOOFED = `evt-${RLO}gnp.exe`; // reads "evt-exe.png"
const CAFE_NFC = "caf\u00e9";
const CAFE_NFD = "cafe\u0301"; // the same on screen, another account for the inbox

function expectInert(run: CliRun, what: string): void {
  expect(run.code, `${what}: ${run.stderr}`).toBe(0);
  expect(RAW_CONTROL.exec(run.stdout + run.stderr), what).toBeNull();
}

function ledgerCli(args: string[], databaseUrl: string): Promise<CliRun> {
  return new Promise((done, fail) => {
    const child = spawn(`${ROOT}/node_modules/.bin/tsx`, ["examples/ledger/cli.ts", ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => { stdout += c.toString("utf8"); });
    child.stderr.on("data", (c: Buffer) => { stderr += c.toString("utf8"); });
    child.once("error", fail);
    child.once("close", (code) => done({ code, stdout, stderr }));
  });
}

describe("control characters from messages are shown inert", () => {
  it("quarantine list, show, diff, status and the ledger's listing escape them; JSON keeps the values", async () => {
    const database = await createEmptyDatabase("sqlite");
    cleanups.push(database.remove);
    const databaseUrl = database.url;
    const queue = `ri.test.controls.${randomBytes(4).toString("hex")}`;
    cleanups.push(await ledgerTopology(queue));
    // One short delayed retry: the adjustment of a missing account is quarantined after it.
    const ledger = await LedgerService.start({ queue, databaseUrl, env: { LEDGER_RETRY_DELAYS_MS: "50" } });

    const conflictId = `e-${CSI8}-${RLO}1`;
    const missingAccount = `acct${RLO}${CSI8}`;
    await publishAll(queue, [
      { type: "account.opened", tenant: "t1", event_id: "e-open", account_id: "a" },
      { type: "balance.adjusted", tenant: "t1", event_id: conflictId, account_id: "a", delta_cents: 10 },
      { type: "balance.adjusted", tenant: "t1", event_id: "e-missing", account_id: missingAccount, delta_cents: 5 },
      { type: "account.opened", tenant: "t1", event_id: "e-open-nfc", account_id: CAFE_NFC },
      { type: "account.opened", tenant: "t1", event_id: "e-open-nfd", account_id: CAFE_NFD },
      { type: "balance.adjusted", tenant: "t1", event_id: SPOOFED, account_id: "zw\u200bac\ufeffct", delta_cents: 1 },
    ]);
    await ledger.waitForSettled(8);
    await publishAll(queue, [{ type: "balance.adjusted", tenant: "t1", event_id: conflictId, account_id: "a", delta_cents: 10, note: `${COLOUR}${TITLE}` }]);
    await publishAll(queue, [`not json ${COLOUR}RED${TITLE} ${CSI8} ${RLO}evil`], { messageId: `m${RLO}1`, headers: { "x-note": `${TITLE}${CSI8}` } });
    await ledger.waitForSettled(10);

    const env = { DATABASE_URL: databaseUrl };
    type Listed = { id: number; reason: string; event_id: string | null; detail: string };
    const listed = await rabbitInboxJson<Listed[]>(["quarantine", "list"], env);
    expect(listed.map((e) => e.reason)).toEqual(["account_missing", "account_missing", "conflict", "invalid"]);
    const [missing, spoofed, conflict, invalid] = listed;
    expect(spoofed!.event_id).toBe(SPOOFED);
    // JSON output: the exact values after parsing, no raw control character in the text.
    expect(conflict!.event_id).toBe(conflictId);
    expect(missing!.detail).toContain(missingAccount);
    const listJson = await runRabbitInbox(["quarantine", "list", "--json"], env);
    expectInert(listJson, "quarantine list --json");
    expect(listJson.stdout).toContain("\\u009b");
    const showJson = await runRabbitInbox(["quarantine", "show", String(invalid!.id), "--json"], env);
    expectInert(showJson, "quarantine show --json");
    expect((JSON.parse(showJson.stdout) as { body: string }).body).toBe(`not json ${COLOUR}RED${TITLE} ${CSI8} ${RLO}evil`);

    // Human-readable output: every one inert, and the sequences visible as escapes.
    const list = await runRabbitInbox(["quarantine", "list"], env);
    expectInert(list, "quarantine list");
    expect(list.stdout).toContain("e-\\x9b2J-\\u202e1");
    expect(list.stdout).toContain("evt-\\u202egnp.exe");
    const showSpoofed = await runRabbitInbox(["quarantine", "show", String(spoofed!.id)], env);
    expectInert(showSpoofed, "quarantine show (a spoofed file name)");
    expect(showSpoofed.stdout).toMatch(/event_id +evt-\\u202egnp\.exe/);
    expect(showSpoofed.stdout).toContain("zw\\u200bac\\ufeffct");
    const showInvalid = await runRabbitInbox(["quarantine", "show", String(invalid!.id)], env);
    expectInert(showInvalid, "quarantine show (invalid)");
    expect(showInvalid.stdout).toContain("not json \\x1b[31mRED\\x1b]0;pwned-title\\x07 \\x9b2J \\u202eevil");
    expect(showInvalid.stdout).toMatch(/properties:\n.*m\\u202e1/);
    const showConflict = await runRabbitInbox(["quarantine", "show", String(conflict!.id)], env);
    expectInert(showConflict, "quarantine show (conflict)");
    const showMissing = await runRabbitInbox(["quarantine", "show", String(missing!.id)], env);
    expectInert(showMissing, "quarantine show (account_missing)");
    expect(showMissing.stdout).toContain("acct\\u202e\\x9b");
    const diff = await runRabbitInbox(["quarantine", "diff", String(conflict!.id)], env);
    expectInert(diff, "quarantine diff");
    expect(diff.stdout).toContain(conflictId.replace(CSI8, "\\x9b2J").replace(RLO, "\\u202e"));
    expectInert(await runRabbitInbox(["status"], env), "status");
    const doctor = await runRabbitInbox(["doctor"], env);
    expectInert({ ...doctor, code: 0 }, "doctor");
    expect(doctor.stdout).toMatch(/^WARN {2}look-alike ids: .*held entr.* e\.g\. #\d+: tenant t1, event evt-\\u202egnp\.exe/m);
    expect(doctor.stdout).toMatch(/^ {6}fix: ids are compared byte for byte/m);
    expectInert(await runRabbitInbox(["quarantine", "show", "999999"], env).then((r) => ({ ...r, code: r.code === 1 ? 0 : r.code })), "an error");

    // The ledger's own listing: inert text, and JSON whose ids are the command's entry ids.
    const ledgerText = await ledgerCli(["quarantine"], databaseUrl);
    expectInert(ledgerText, "ledger quarantine");
    expect(ledgerText.stdout).toContain("acct\\u202e\\x9b");
    // Two accounts that look alike: the decomposed one shows its combining mark.
    const balances = await ledgerCli(["balances"], databaseUrl);
    expectInert(balances, "ledger balances");
    expect(balances.stdout.split("\n")).toEqual(expect.arrayContaining(["t1\tcaf\u00e9\t0", "t1\tcafe\\u0301\t0"]));
    const balancesJson = await ledgerCli(["balances", "--json"], databaseUrl);
    expectInert(balancesJson, "ledger balances --json");
    expect((JSON.parse(balancesJson.stdout) as Array<{ account_id: string }>).map((b) => b.account_id)).toEqual(expect.arrayContaining([CAFE_NFC, CAFE_NFD]));
    const ledgerJson = await ledgerCli(["quarantine", "--json"], databaseUrl);
    expectInert(ledgerJson, "ledger quarantine --json");
    const ledgerEntries = await cliQuarantine(databaseUrl);
    expect(ledgerEntries.map((e) => [e.id, e.reason, e.event_id]).sort()).toEqual(listed.map((e) => [e.id, e.reason, e.event_id]).sort());
    expect(await ledger.stop()).toBe(0);
  });
});
