/**
 * A libpq multi-host URL (`h1:p1,h2:p2` with `target_session_attrs`), and the same host list on
 * mysql://, everywhere a URL is taken: openStore, the `rabbit-inbox` command and the ledger's
 * DATABASE_URL. The first node listed is a port nothing listens on (a node that is down); the
 * second is the test server. Logs name the node chosen and the one skipped, never the password.
 * Failovers between live nodes (a standby promoted, Patroni, Galera) are in test/ha.
 */
import { afterEach, describe, expect, it } from "vitest";
import { cliBalances, cliQuarantine } from "../../examples/ledger/driver/ledger-cli.js";
import { accountOpened, balanceAdjusted } from "../../examples/ledger/driver/ledger-messages.js";
import { openStore } from "../../src/index.js";
import { createEmptyDatabase } from "../support/databases.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { runRabbitInbox } from "../support/rabbit-inbox-cli.js";
import { type LogLine, collectingLogger } from "../support/sqlite-effects.js";
import { onSelectedDatabases } from "../support/test-databases.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

/** The test server trusts local connections: any password works, and none may be printed. */
const PASSWORD = "S3cret-multi-host-pw";

/** The URL with a node that is down listed first: `scheme://user:PASSWORD@127.0.0.1:1,host:port/...`. */
function withDeadNodeFirst(url: string, kind: "postgres" | "mysql"): { url: string; live: string } {
  const parsed = new URL(url);
  const live = `${parsed.hostname}:${parsed.port || (kind === "postgres" ? 5432 : 3306)}`;
  const userinfo = `${parsed.username}${kind === "postgres" ? `:${PASSWORD}` : ""}@`;
  const query = parsed.search ? `${parsed.search}&` : "?";
  return { url: `${parsed.protocol}//${userinfo}127.0.0.1:1,${live}${parsed.pathname}${query}target_session_attrs=read-write`, live };
}

describe.each(onSelectedDatabases(["postgres", "mysql"] as const))("a host list whose first node is down (%s)", (kind) => {
  it("openStore and the command work on the node that answers, and say which; no output holds the password", async () => {
    const database = await createEmptyDatabase(kind);
    cleanups.push(() => database.remove());
    const { url, live } = withDeadNodeFirst(database.url, kind);
    const lines: LogLine[] = [];
    const store = await openStore(url, { logger: collectingLogger(lines), poolSize: 2, source: "DATABASE_URL" });
    cleanups.push(() => store.close());
    await store.migrate();
    expect(await store.operations().appliedMigrations()).toEqual(store.operations().migrations.map((m) => m.version));
    const chosen = lines.find((l) => l.message === "database node chosen");
    expect(chosen?.fields).toMatchObject({ node: live, targetSessionAttrs: "read-write", skipped: [expect.stringMatching(/^127\.0\.0\.1:1 cannot connect: .*ECONNREFUSED/)] });
    expect(JSON.stringify(lines)).not.toContain(PASSWORD);
    expect(await store.checkWrites()).toMatchObject({ available: true, node: live });

    const status = await runRabbitInbox(["status"], { DATABASE_URL: url });
    expect(status.code, status.stderr).toBe(0);
    const doctor = await runRabbitInbox(["doctor"], { DATABASE_URL: url });
    expect(doctor.stdout).toContain(`ok    database writes: node ${live} accepts writes (nodes tried in order: 127.0.0.1:1, ${live})`);
    for (const run of [status, doctor]) expect(run.stdout + run.stderr).not.toContain(PASSWORD);
  });
});

describe.each(onSelectedDatabases(["postgres", "mysql"] as const))("the ledger with a host list in DATABASE_URL (%s)", (kind) => {
  const t = useLedgerTest(kind);

  it("consumes into the node that answers, logs it, and never prints the password", async () => {
    const { url, live } = withDeadNodeFirst(t.databaseUrl, kind);
    const ledger = await t.start({ databaseUrl: url, logLevel: "info" });
    await t.broker.publish(t.queue, [accountOpened("t1", "open-a", "a"), balanceAdjusted("t1", "adj-1", "a", 250)]);
    const [exit] = await t.stopWhenIdle([ledger]);
    expect(exit).toEqual({ code: 0, signal: null });
    expect(await cliBalances(url)).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 250 }]);
    expect(await cliQuarantine(url)).toEqual([]);
    expect(ledger.logs.find((r) => r.msg === "database node chosen")).toMatchObject({ node: live });
    expect(ledger.outputTail()).not.toContain(PASSWORD);
    expect(JSON.stringify(ledger.logs)).not.toContain(PASSWORD);
  });
});
