/**
 * `npm run demo`: the source article's story, played against the real broker with real ledger
 * processes. It narrates each step, then checks the invariants and exits non-zero if one failed.
 *   AMQP_URL      default amqp://guest:guest@127.0.0.1:5672
 *   DATABASE_URL  default: a fresh SQLite file ./data/demo-<timestamp>.sqlite
 * `npm run demo:nest` (or `npm run demo -- --nest`) plays it with the Nest ledger
 * (`npm run start:nest`, TypeORM), which needs DATABASE_URL=postgres://... or mysql://...
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { join, relative } from "node:path";
import { redactSecrets } from "../../src/operations.js";
// The demo drives real ledger processes and reads the tables with the tests' own tools: it plays
// a scenario and checks it, as a test does, but narrated.
import { BrokerClient, headerText } from "./driver/broker-client.js";
import { DEFAULT_AMQP_URL, REPO_ROOT } from "./driver/ledger-environment.js";
import { type LedgerMessage, accountOpened, balanceAdjusted } from "./driver/ledger-messages.js";
import { LedgerProcess, killAllLedgerProcesses } from "./driver/ledger-process.js";
import { type LedgerTables, readLedgerTables } from "./driver/ledger-tables.js";
import { ledgerExchangeNames, ledgerQueueNames } from "./driver/ledger-topology.js";
import { waitUntil } from "./driver/wait-until.js";
import { describeError } from "./settings.js";

/** The ledger's delayed retries in the demo: short, so the refused adjustment settles in under a second. */
const DEMO_RETRY_DELAYS_MS = [200, 500];

const say = (text = "") => console.log(text);
const indent = (text: string) => say(`    ${text}`);
const step = (n: number, title: string, ...why: string[]) => {
  say();
  say(`${n}. ${title}`);
  for (const line of why) indent(line);
};

interface Check { name: string; pass: boolean; detail: string }

async function main(argv: readonly string[]): Promise<number> {
  const unknown = argv.filter((a) => a !== "--nest");
  if (unknown.length > 0) {
    console.error(`demo: unknown argument ${unknown.join(" ")}; usage: npm run demo [-- --nest]`);
    return 2;
  }
  const app = argv.includes("--nest") ? "nest" : "ledger";
  const amqpUrl = process.env.AMQP_URL || DEFAULT_AMQP_URL;
  let broker: BrokerClient;
  try {
    broker = await BrokerClient.connect(amqpUrl, { timeoutMs: 3000 });
  } catch (error) {
    const why = redactSecrets(describeError(error));
    console.error(/ACCESS.REFUSED/.test(why)
      ? `demo: RabbitMQ at ${redactSecrets(amqpUrl)} refused the login (${why}); check the user and password in AMQP_URL.`
      : `demo: RabbitMQ is not reachable at ${redactSecrets(amqpUrl)} (${why}); start it with \`rabbitmq-server -detached\` (or set AMQP_URL), then run \`npm run demo\` again.`);
    return 1;
  }

  const given = process.env.DATABASE_URL?.trim();
  if (app === "nest" && !/^(postgres|postgresql|mysql|mariadb):\/\//.test(given ?? "")) {
    console.error("demo: --nest plays the story with the Nest ledger on TypeORM, which needs a server database: set DATABASE_URL=postgres://... or mysql://... (e.g. postgres://postgres@127.0.0.1:5432/test)");
    await broker.close();
    return 2;
  }
  // 20261130-063233-123: sorts by time, and two demos started in one second still get two files.
  const stamp = new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").replace(".", "-").slice(0, 19);
  const databaseUrl = given || join(REPO_ROOT, "data", `demo-${stamp}.sqlite`);
  // npm runs scripts from the repository root, so a path relative to it works in the hints below.
  const shownDatabase = given ? redactSecrets(given) : relative(REPO_ROOT, databaseUrl);
  // In a database of your own, a tenant of its own keeps the demo's rows apart from yours.
  const tenant = given ? `demo-${randomBytes(3).toString("hex")}` : "t1";
  const queue = `ledger.demo.${randomBytes(4).toString("hex")}`;
  const quarantineQueue = `${queue}.quarantine`;

  say(`rabbit-inbox demo: "an ACK is not business idempotency"${app === "nest" ? " (the Nest ledger: npm run start:nest, TypeORM)" : ""}`);
  say();
  say("RabbitMQ delivers at least once. A consumer can COMMIT its database work and die before it");
  say("ACKs; the broker then delivers the message again, and a plain `balance += delta` runs twice.");
  say("The ledger below does it in the safe order: validate -> ONE transaction { record event_id ;");
  say("update balance } -> COMMIT -> ACK, so a second delivery finds the record and changes nothing.");
  say();
  say(`  broker    ${redactSecrets(amqpUrl)}, queue ${queue}`);
  say(`  database  ${shownDatabase}${given ? "" : " (a fresh SQLite file)"}`);
  say(`  tenant    ${tenant}`);

  const checks: Check[] = [];
  const check = (name: string, pass: boolean, detail: string) => checks.push({ name, pass, detail });
  const started = Date.now();
  try {
    await broker.declare(queue);
    await story({ app, broker, databaseUrl, tenant, queue, quarantineQueue, check });
  } catch (error) {
    say();
    say(`The story stopped early: ${describeError(error)}`);
    check("the story ran to the end", false, "see the error above");
  } finally {
    await killAllLedgerProcesses();
    await broker.deleteQueues(...ledgerQueueNames(queue)).catch(() => undefined);
    await broker.deleteExchanges(...ledgerExchangeNames(queue)).catch(() => undefined);
    await broker.close();
  }

  say();
  say("Invariants");
  const width = Math.max(...checks.map((c) => c.name.length));
  for (const c of checks) say(`  ${c.pass ? "PASS" : "FAIL"}  ${c.name.padEnd(width)}  ${c.detail}`);
  const failed = checks.filter((c) => !c.pass).length;
  say();
  say(failed === 0
    ? `All ${checks.length} invariants held (${((Date.now() - started) / 1000).toFixed(1)} s).`
    : `${failed} of ${checks.length} invariants FAILED.`);
  say();
  say("Look at what the ledger kept:");
  const env = `DATABASE_URL='${shownDatabase}'`;
  indent(`${env} npm run --silent ledger -- balances`);
  indent(`${env} npm run --silent ledger -- quarantine`);
  if (!given) {
    // Every run makes a new file: say so, or ./data quietly fills up with them.
    say();
    say(`The demo leaves ${shownDatabase} behind for that; remove it with \`rm ${shownDatabase}*\`,`);
    say("or every demo's file with `rm data/demo-*.sqlite*`.");
  }
  return failed === 0 ? 0 : 1;
}

interface StoryContext {
  /** Which ledger service plays the story. */
  app: "ledger" | "nest";
  broker: BrokerClient;
  databaseUrl: string;
  tenant: string;
  queue: string;
  quarantineQueue: string;
  check: (name: string, pass: boolean, detail: string) => void;
}

async function story(ctx: StoryContext): Promise<void> {
  const { app, broker, databaseUrl, tenant, queue, quarantineQueue, check } = ctx;
  // Short delayed retries (LEDGER_RETRY_DELAYS_MS), so step 8 does not wait the default 71 s.
  const start = (fault?: string) => LedgerProcess.start({ app, queue, databaseUrl, retryDelaysMs: DEMO_RETRY_DELAYS_MS, ...(fault ? { fault } : {}) });
  const mine = async (): Promise<LedgerTables> => {
    const t = await readLedgerTables(databaseUrl);
    return {
      inbox: t.inbox.filter((r) => r.tenant === tenant),
      accounts: t.accounts.filter((r) => r.tenant === tenant),
      quarantine: t.quarantine.filter((r) => r.queue === queue),
    };
  };
  const balanceOf = async (account: string) => (await mine()).accounts.find((a) => a.account_id === account)?.balance_cents;
  /** Publishes and waits until `ledger` has settled one more delivery. */
  const deliver = async (ledger: LedgerProcess, body: LedgerMessage | string) => {
    const before = ledger.settled();
    await broker.publish(queue, [body]);
    await ledger.waitForSettled(before + 1);
  };
  const exits: Array<{ what: string; code: number | null }> = [];

  step(1, "Start the ledger consumer", "A separate process, as in production: `npm start` with LEDGER_QUEUE and DATABASE_URL.");
  let ledger = await start();
  indent(`ledger consumer running (pid ${ledger.pid})`);

  step(2, "Open an account");
  await deliver(ledger, accountOpened(tenant, "e-open-alice", "alice"));
  indent(`-> account.opened  e-open-alice  alice`);
  indent(`<- applied. alice: ${await balanceOf("alice")} cents`);

  step(3, "Credit it 100 cents", "Money is integer cents: no floats anywhere near a balance.");
  const credit = balanceAdjusted(tenant, "evt-1", "alice", 100);
  await deliver(ledger, credit);
  indent(`-> balance.adjusted  evt-1  alice  +100`);
  indent(`<- applied. alice: ${await balanceOf("alice")} cents`);

  step(4, "The same event, delivered again",
    "RabbitMQ may deliver a message twice, and a producer that retries must reuse its event_id.");
  await deliver(ledger, credit);
  indent(`-> balance.adjusted  evt-1  alice  +100   (the same event again)`);
  const duplicates = ledger.settledCounts().duplicate;
  indent(`<- ${duplicates === 1 ? "duplicate" : `unexpected outcome (duplicates: ${duplicates})`}: the inbox already holds (${tenant}, ledger, evt-1)`);
  indent(`   with the same payload fingerprint, so the delivery is acked and the balance left alone.`);
  indent(`   alice: ${await balanceOf("alice")} cents`);

  step(5, "Commit, then crash before the ACK",
    "The failure window of the article: the transaction commits, the process dies, the ACK never leaves.");
  exits.push({ what: "first consumer (SIGTERM)", code: (await ledger.stop()).code });
  indent("stopped the consumer (SIGTERM: it drains its work, acks, and exits 0)");
  indent("started a consumer with RABBIT_INBOX_FAULT=after-commit:crash");
  const crashing = await start("after-commit:crash");
  await broker.publish(queue, [balanceAdjusted(tenant, "evt-2", "alice", 250)]);
  indent(`-> balance.adjusted  evt-2  alice  +250`);
  const crash = await crashing.waitForExit();
  const afterCrash = await mine();
  const waiting = await broker.depthWithoutConsumers(queue);
  indent(`x  the consumer committed evt-2 and exited with code ${crash.code} before acking it`);
  indent(`   database: alice = ${afterCrash.accounts.find((a) => a.account_id === "alice")?.balance_cents} cents; the inbox holds evt-2`);
  indent(`   broker:   ${waiting} message back in the queue, to be delivered again`);
  indent("   (a consumer that only ran `balance += delta` would credit alice a second time now)");
  indent("restarting the consumer without the fault, this time serving its metrics (LEDGER_METRICS_PORT)");
  const metricsPort = await freePort();
  ledger = await LedgerProcess.start({ app, queue, databaseUrl, retryDelaysMs: DEMO_RETRY_DELAYS_MS, metricsPort });
  const redelivery = await waitUntil(
    () => ledger.redeliveries().find((r) => r.eventId === "evt-2"),
    "the redelivery of evt-2", { watch: [ledger] },
  );
  indent(`<- evt-2 arrived again with redelivered=true: ${redelivery.outcome}. alice: ${await balanceOf("alice")} cents`);

  step(6, "A producer reuses an event_id with a different amount",
    "Payloads are immutable: same id, other content is a conflict. Never a silent duplicate.");
  await deliver(ledger, balanceAdjusted(tenant, "evt-1", "alice", 900));
  indent(`-> balance.adjusted  evt-1  alice  +900   (evt-1 was +100)`);
  const alarm = ledger.logsAt("error").find((r) => r.eventId === "evt-1");
  indent(`<- CONFLICT, logged at error level: "${alarm?.msg ?? "(no error line!)"}"`);
  indent(`   quarantined in the database and in ${quarantineQueue}; alice: ${await balanceOf("alice")} cents`);

  step(7, "A malformed message");
  const malformed = `{"type":"balance.adjusted","tenant":"${tenant}","event_id":"evt-x","delta_cents":`;
  await deliver(ledger, malformed);
  indent(`-> ${malformed}`);
  const invalidRow = (await mine()).quarantine.find((r) => r.reason === "invalid");
  indent(`<- quarantined as invalid: ${invalidRow?.detail ?? "(no quarantine row!)"}`);

  step(8, "An adjustment to an account that was never opened",
    "Its opening may still be on its way (another replica, a retry), so it waits in the delayed-retry queues first.");
  await broker.publish(queue, [balanceAdjusted(tenant, "evt-3", "bob", 50)]);
  indent(`-> balance.adjusted  evt-3  bob  +50`);
  const missingRow = await waitUntil(
    async () => (await mine()).quarantine.find((r) => r.reason === "account_missing"),
    "the account_missing quarantine entry of evt-3", { watch: [ledger] },
  ).catch(() => undefined);
  const waits = ledger.logs.filter((r) => r.msg === "delayed retry scheduled" && r.eventId === "evt-3").length;
  indent(`<- not yet: waited in ${queue}.retry.1..${waits} (${DEMO_RETRY_DELAYS_MS.join(", ")} ms), bob never opened`);
  indent(`<- quarantined as account_missing: ${missingRow?.detail ?? "(no quarantine row!)"}`);

  step(9, "What the consumer's metrics say", `GET http://127.0.0.1:${metricsPort}/metrics (Prometheus text; docs/observability.md lists every series).`);
  for (const line of await metricsExcerpt(metricsPort)) indent(line);

  step(10, "Stop the consumer");
  exits.push({ what: "restarted consumer (SIGTERM)", code: (await ledger.stop()).code });
  indent("SIGTERM: it drained its in-flight work and exited");

  // ---- the invariants, read back from the database and the broker
  const end = await mine();
  const alice = end.accounts.find((a) => a.account_id === "alice")?.balance_cents;
  const bob = end.accounts.find((a) => a.account_id === "bob");
  check("balance exact", alice === 350 && bob === undefined,
    `alice = ${alice} cents (expected 0 + 100 + 250 = 350); bob ${bob ? "has an account!" : "has no account"}`);

  const ids = end.inbox.map((r) => r.event_id).sort();
  const expectedIds = ["e-open-alice", "evt-1", "evt-2"];
  check("each event applied once", JSON.stringify(ids) === JSON.stringify(expectedIds),
    `inbox rows: ${ids.join(", ") || "none"} (expected exactly ${expectedIds.join(", ")})`);

  check("crash after commit: no second effect", crash.code === 70 && waiting === 1 && redelivery.outcome === "duplicate",
    `exit code ${crash.code}, ${waiting} message redelivered, outcome ${redelivery.outcome}`);

  const conflict = end.quarantine.find((r) => r.reason === "conflict" && r.event_id === "evt-1");
  const storedFingerprint = end.inbox.find((r) => r.event_id === "evt-1")?.fingerprint;
  const bothFingerprints = !!conflict?.fingerprint && !!conflict.stored_fingerprint
    && conflict.fingerprint !== conflict.stored_fingerprint && conflict.stored_fingerprint === storedFingerprint;
  check("conflict quarantined, loud", bothFingerprints && alarm !== undefined,
    conflict
      ? `stored ${conflict.stored_fingerprint?.slice(0, 12)}..., new ${conflict.fingerprint?.slice(0, 12)}...; error logged: ${alarm ? "yes" : "NO"}`
      : "no conflict row in the quarantine table");

  check("malformed message quarantined", invalidRow !== undefined && invalidRow.body.toString("utf8") === malformed,
    invalidRow ? "reason invalid, raw body kept" : "no invalid row in the quarantine table");

  check("missing account quarantined", missingRow?.event_id === "evt-3",
    missingRow ? "reason account_missing, evt-3" : "no account_missing row in the quarantine table");

  const held = await broker.takeAll(quarantineQueue);
  const reasons = held.map((m) => headerText(m, "x-rabbit-inbox-reason") ?? "?").sort();
  check("quarantine queue holds them", JSON.stringify(reasons) === JSON.stringify(["account_missing", "conflict", "invalid"]),
    `${quarantineQueue}: ${held.length} messages (${reasons.join(", ")})`);

  const left = await broker.depthWithoutConsumers(queue);
  check("nothing left in the queue", left === 0, `${queue}: ${left} messages ready or unacknowledged`);

  check("SIGTERM drains and exits 0", exits.every((e) => e.code === 0), exits.map((e) => `${e.what}: exit ${e.code}`).join("; "));
}

/** A port nothing listens on now, for the ledger's metrics server. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/** The outcome and quarantine counters of the ledger's scrape, without the help and type lines. */
async function metricsExcerpt(port: number): Promise<string[]> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const wanted = /^rabbit_inbox_(messages_total|quarantined_total|redeliveries_total|outbox_published_total)\{/;
    const lines = text.split("\n").filter((line) => wanted.test(line) && !/ 0$/.test(line));
    return lines.length > 0 ? lines : ["(no counters above zero in the scrape)"];
  } catch (error) {
    return [`(could not read the metrics: ${describeError(error)})`];
  }
}

let exiting = false;
const interrupt = () => {
  if (exiting) return;
  exiting = true;
  void killAllLedgerProcesses().finally(() => process.exit(130));
};
process.on("SIGINT", interrupt);
process.on("SIGTERM", interrupt);

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`demo: ${redactSecrets(describeError(error))}`);
    void killAllLedgerProcesses().finally(() => process.exit(1));
  },
);
