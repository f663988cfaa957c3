/**
 * What the consumer refuses as it arrives: a content type that merely contains "json", a body
 * with a duplicate key, and an unsupported content encoding are quarantined as `invalid`, and the
 * copy on the quarantine queue keeps the original's content type and encoding, type, timestamp,
 * message id and headers, so that an operator can read and replay it. The ledger, real broker,
 * SQLite.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { readLedgerTables } from "../../examples/ledger/driver/ledger-tables.js";
import { drainQueue, publishAll } from "../support/broker.js";
import { createEmptyDatabase } from "../support/databases.js";
import { LedgerService, ledgerTopology } from "../support/rabbit-inbox-cli.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

describe("refused on arrival, copied whole to the quarantine queue", () => {
  it("jsonp content type, duplicate keys and gzip encoding are invalid; the copy keeps the properties", async () => {
    const database = await createEmptyDatabase("sqlite");
    cleanups.push(database.remove);
    const queue = `ri.test.copy.${randomBytes(4).toString("hex")}`;
    cleanups.push(await ledgerTopology(queue));
    const ledger = await LedgerService.start({ queue, databaseUrl: database.url });
    const timestamp = 1_764_000_000;
    const open = { type: "account.opened", tenant: "t1", event_id: "e-open", account_id: "a" };
    await publishAll(queue, [open]);
    await ledger.waitForSettled(1);
    await publishAll(queue, [{ type: "balance.adjusted", tenant: "t1", event_id: "e-1", account_id: "a", delta_cents: 5 }],
      { contentType: "application/jsonp", type: "balance.adjusted", timestamp, messageId: "m-1" });
    await publishAll(queue, ['{"type":"balance.adjusted","tenant":"t1","event_id":"e-2","account_id":"a","delta_cents":1,"delta_cents":1000}'],
      { type: "balance.adjusted", timestamp, messageId: "m-2", headers: { "x-trace": "tr-2" } });
    await publishAll(queue, [{ type: "balance.adjusted", tenant: "t1", event_id: "e-3", account_id: "a", delta_cents: 7 }],
      { contentEncoding: "gzip", type: "balance.adjusted", timestamp, messageId: "m-3" });
    await ledger.waitForSettled(4);
    expect(ledger.settled()).toMatchObject({ applied: 1, quarantined: 3 });

    const tables = await readLedgerTables(database.url);
    expect(tables.accounts).toEqual([{ tenant: "t1", account_id: "a", balance_cents: 0 }]);
    expect(tables.quarantine.map((q) => [q.reason, q.detail])).toEqual([
      ["invalid", expect.stringMatching(/content type "application\/jsonp" is not JSON/)],
      ["invalid", expect.stringMatching(/key "delta_cents" twice/)],
      ["invalid", expect.stringMatching(/content encoding "gzip" is not supported/)],
    ]);

    const copies = await drainQueue(`${queue}.quarantine`);
    expect(copies.map((m) => m.properties.messageId as unknown)).toEqual(["m-1", "m-2", "m-3"]);
    for (const copy of copies) {
      expect(copy.properties).toMatchObject({ type: "balance.adjusted", timestamp, deliveryMode: 2 });
      expect(copy.properties.headers).toMatchObject({ "x-rabbit-inbox-reason": "invalid" });
    }
    expect(copies[0]!.properties.contentType).toBe("application/jsonp");
    expect(copies[1]!.properties.headers).toMatchObject({ "x-trace": "tr-2" });
    expect(copies[2]!.properties.contentEncoding).toBe("gzip");
    expect(copies[0]!.properties.contentEncoding).toBeUndefined();
    expect(await ledger.stop()).toBe(0);
  });
});
