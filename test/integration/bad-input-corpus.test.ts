/**
 * The whole bad-input corpus (test/corpus/bad-input-corpus.ts, 200+ cases) through the real
 * broker into the ledger service, on each database: 0 crashes (the process exits 0 on SIGTERM
 * after draining), 0 business writes, every case quarantined as `invalid` exactly once and
 * published to the quarantine queue, and the valid controls with odd headers applied once.
 */
import amqp from "amqplib";
import { describe, expect, it } from "vitest";
import { amqpUrlFromEnv } from "../../examples/ledger/driver/ledger-environment.js";
import { accountOpened } from "../../examples/ledger/driver/ledger-messages.js";
import { type CorpusCase, badInputCorpus, validControls } from "../corpus/bad-input-corpus.js";
import { useLedgerTest } from "../support/ledger-harness.js";
import { onSelectedDatabases } from "../support/test-databases.js";

async function publishCases(queue: string, cases: readonly CorpusCase[]): Promise<void> {
  const connection = await amqp.connect(amqpUrlFromEnv());
  try {
    const channel = await connection.createConfirmChannel();
    for (const c of cases) {
      const options: amqp.Options.Publish = { persistent: true };
      // An empty string means "no content type at all"; undefined means the usual JSON one.
      if (c.contentType === undefined) options.contentType = "application/json";
      else if (c.contentType !== "") options.contentType = c.contentType;
      if (c.contentEncoding !== undefined) options.contentEncoding = c.contentEncoding;
      if (c.headers !== undefined) options.headers = c.headers;
      channel.sendToQueue(queue, c.body, options);
    }
    await channel.waitForConfirms();
  } finally {
    await connection.close();
  }
}

const KINDS = onSelectedDatabases(["postgres", "sqlite"] as const);

describe.each(KINDS)("bad-input corpus through the broker into the ledger (%s)", (kind) => {
  const ctx = useLedgerTest(kind);

  it("quarantines every case as invalid with 0 crashes and 0 business writes, and applies the valid controls once", async () => {
    const corpus = badInputCorpus();
    const controls = validControls();
    expect(corpus.length).toBeGreaterThanOrEqual(200);

    const ledger = await ctx.start();
    await ctx.broker.publish(ctx.queue, [accountOpened("t1", "open-a", "a")]);
    await ledger.waitForSettled(1);
    await publishCases(ctx.queue, [...corpus, ...controls]);
    const [exit] = await ctx.stopWhenIdle([ledger], 120_000);

    expect(exit, ledger.outputTail()).toMatchObject({ code: 0 });
    expect(ledger.logsAt("error"), "no error-level log lines").toEqual([]);
    expect(await ctx.depth()).toBe(0);

    const tables = await ctx.tables();
    const expectedBalance = controls.reduce((sum, c) => sum + c.deltaCents, 0);
    expect(tables.accounts).toEqual([{ tenant: "t1", account_id: "a", balance_cents: expectedBalance }]);
    // The opening and the controls only: no malformed case left a dedup record.
    expect(tables.inbox.map((r) => r.event_id).sort()).toEqual(
      ["open-a", ...controls.map((c) => (JSON.parse(c.body.toString()) as { event_id: string }).event_id)].sort(),
    );
    expect(tables.quarantine).toHaveLength(corpus.length);
    for (const row of tables.quarantine) {
      expect(row.reason).toBe("invalid");
      expect(row.occurrences).toBe(1);
      expect(row.detail.length).toBeGreaterThan(0);
    }
    const quarantinedBodies = new Set(tables.quarantine.map((r) => r.body.toString("base64")));
    for (const c of corpus) {
      // Bodies over the row cap are kept truncated; every smaller one is kept whole.
      if (c.body.length <= 64 * 1024) expect(quarantinedBodies.has(c.body.toString("base64")), c.name).toBe(true);
    }

    const published = await ctx.broker.takeAll(ctx.quarantineQueue);
    expect(published).toHaveLength(corpus.length);
    expect(published.every((m) => m.properties.headers?.["x-rabbit-inbox-reason"] === "invalid")).toBe(true);

    const cli = await ctx.cli();
    expect(cli.quarantine).toHaveLength(corpus.length);
    expect(cli.quarantine.every((q) => q.reason === "invalid")).toBe(true);
  }, 300_000);
});
