/**
 * Passwords in DATABASE_URL and AMQP_URL never reach the output of `rabbit-inbox` (status, status
 * --json, doctor, migrate, errors) nor the ledger's start line, whatever the password holds: a
 * real PostgreSQL schema (trust authentication accepts any password, so the commands succeed and
 * print the URL they used), the real broker. The URLs are TEST_PG_URL's and TEST_AMQP_URL's with
 * passwords of the test's own.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { redactSecrets } from "../../src/core/redact-secrets.js";
import { amqpUrl, deleteQueues } from "../support/broker.js";
import { createPgSchema } from "../support/databases.js";
import { LedgerService, ledgerTopology, runRabbitInbox } from "../support/rabbit-inbox-cli.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

/** The schema's URL in parts: what comes before the password, and what after. */
function partsOf(url: string): { user: string; rest: string } {
  const u = new URL(url);
  return { user: `${u.protocol}//${u.username}`, rest: `${u.host}${u.pathname}${u.search}` };
}

/** The same migrated schema, reached with the password in the query, and with an `@` in it. */
async function databaseUrls(): Promise<Array<{ url: string; secrets: string[] }>> {
  const schema = await createPgSchema();
  cleanups.push(() => schema.drop());
  const { user, rest } = partsOf(schema.url);
  expect(rest).toMatch(/\?options=/);
  const urls = [
    { url: `${user}@${rest}&password=S3cretPW`, secrets: ["S3cretPW"] },
    { url: `${user}:p@ss@${rest}`, secrets: ["p@ss", `ss@${rest.slice(0, 3)}`] },
    { url: `${user}:Pw%40Secret%3A9@${rest}`, secrets: ["Pw%40Secret", "Secret%3A9"] },
  ];
  const migrate = await runRabbitInbox(["migrate"], { DATABASE_URL: urls[0]!.url });
  expect(migrate.code, migrate.stderr).toBe(0);
  return urls;
}

function expectNoSecret(output: string, secrets: string[]): void {
  for (const secret of secrets) expect(output).not.toContain(secret);
}

describe("credentials stay out of the command's output", () => {
  it("status, status --json, migrate and doctor show the database without its password", async () => {
    for (const { url, secrets } of await databaseUrls()) {
      const env = { DATABASE_URL: url };
      const { user, rest } = partsOf(url.replace(/&password=.*$/, ""));
      const named = `postgres ${escapeRegExp(user)}(:\\*\\*\\*)?@${escapeRegExp(rest.replace(/\?.*$/, ""))}\\?`;
      const runs = await Promise.all([
        runRabbitInbox(["status"], env), runRabbitInbox(["status", "--json"], env), runRabbitInbox(["migrate"], env), runRabbitInbox(["doctor"], env),
      ]);
      for (const run of runs) expectNoSecret(run.stdout + run.stderr, secrets);
      const [status, statusJson, migrate, doctor] = runs;
      // They did run against the database, and named it.
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toMatch(new RegExp(`^database: ${named}`, "m"));
      expect(statusJson.code).toBe(0);
      expect((JSON.parse(statusJson.stdout) as { database: string }).database).toMatch(new RegExp(`^${named}`));
      expect(migrate.code).toBe(0);
      expect(doctor.stdout).toMatch(/^ok\s+schema: /m);
    }
  });

  it("errors naming a URL mask its password: an unreachable database and an unreachable broker", async () => {
    const queue = `ri.test.secrets.${randomBytes(4).toString("hex")}`;
    cleanups.push(() => deleteQueues(queue, `${queue}.quarantine`));
    const noDatabase = await runRabbitInbox(["status"], { DATABASE_URL: "postgres://postgres:p@ss:w/rd@127.0.0.1:1/test?password=S3cretPW" });
    expect(noDatabase.code).not.toBe(0);
    expectNoSecret(noDatabase.stdout + noDatabase.stderr, ["p@ss", "w/rd", "S3cretPW"]);
    expect(noDatabase.stderr).toMatch(/^rabbit-inbox: /);

    const noBroker = await runRabbitInbox(["doctor", "--queue", queue, "--amqp-url", "amqp://guest:Br0ker@Secret@127.0.0.1:1,amqp://guest:Other:9@127.0.0.1:2"], {
      DATABASE_URL: "mysql://root:My@Secret@127.0.0.1:1/test",
    });
    expect(noBroker.code).toBe(1);
    expect(noBroker.stdout).toMatch(/^FAIL\s+broker: cannot connect to amqp:\/\/guest:\*\*\*@127\.0\.0\.1:1/m);
    expect(noBroker.stdout).toMatch(/^FAIL\s+database: /m);
    expectNoSecret(noBroker.stdout + noBroker.stderr, ["Br0ker", "Secret", "Other:9"]);
  });

  it("the ledger's start line shows its database and broker without passwords", async () => {
    const { url, secrets } = (await databaseUrls())[0]!;
    const queue = `ri.test.secrets.${randomBytes(4).toString("hex")}`;
    cleanups.push(await ledgerTopology(queue));
    const ledger = await LedgerService.start({ queue, databaseUrl: url });
    cleanups.push(() => ledger.stop());
    const start = ledger.stdout.find((l) => l.startsWith("ledger: consuming"));
    const { user, rest } = partsOf(url);
    expect(start).toMatch(new RegExp(` from ${escapeRegExp(redactSecrets(amqpUrl))} into postgres ${escapeRegExp(user)}@${escapeRegExp(rest.replace(/\?.*$/, ""))}\\?.*&password=\\*\\*\\*$`));
    expectNoSecret([...ledger.stdout, ...ledger.stderr].join("\n"), secrets);
  });
});
