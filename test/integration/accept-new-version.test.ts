/**
 * A conflict the operator accepts (`rabbit-inbox quarantine replay --accept-new`, through the
 * same operations API): the new version is applied with outbox message ids and idempotency keys
 * of its own. With the replaced version's ids, the outbox would skip the new version's message
 * (it skips an id it already holds) and a downstream consumer would take it for the old one; a
 * payment API would answer the replaced version's result for the old key. PostgreSQL, SQLite
 * and MySQL/MariaDB.
 */
import { describe, expect, it } from "vitest";
import { type InboxHandler, outboxMessageId } from "../../src/index.js";
import type { Outcome } from "../../src/core/outcome.js";
import { fingerprintOf } from "../../src/core/fingerprint.js";
import { HANDLER, delivery, event, retentionFixture } from "../support/retention-fixture.js";
import { TEST_DATABASES } from "../support/test-databases.js";

const kinds = (outcomes: readonly Outcome[]) => outcomes.map((o) => (o.kind === "quarantined" ? `quarantined:${o.reason}` : o.kind));
const text = (value: unknown) => (Buffer.isBuffer(value) ? value.toString("utf8") : String(value));

describe.each(TEST_DATABASES)("accept-new on %s", (kind) => {
  it("the accepted version publishes under ids of its own and gets idempotency keys of its own; its redelivery is a duplicate", async () => {
    const f = await retentionFixture(kind);
    const keys: string[] = [];
    const handler: InboxHandler<Record<string, unknown>, unknown> = {
      name: HANDLER,
      async handle(e, ctx) {
        keys.push(ctx.idempotencyKey("payment"));
        await ctx.publish("payments", "charge", { event_id: ctx.key.eventId, amount: e.n });
      },
    };
    const pipeline = f.pipeline({ handler });
    const first = event("d-1", { n: 100 });
    const corrected = event("d-1", { n: 150 });

    expect(kinds(await pipeline.process([delivery(first)]))).toEqual(["applied"]);
    expect(kinds(await pipeline.process([delivery(corrected)]))).toEqual(["quarantined:conflict"]);
    const [conflict] = await f.ops.listQuarantineEntries({ reason: "conflict" });
    await f.ops.beginResolution(conflict!.id, { action: "replay", actor: "test", reason: "corrected amount", acceptNew: true });
    expect(kinds(await pipeline.process([delivery(corrected)]))).toEqual(["applied"]);
    expect(kinds(await pipeline.process([delivery(corrected)]))).toEqual(["duplicate"]);

    const source = { tenant: "t1", handler: HANDLER, eventId: "d-1" };
    const outbox = await f.rows("SELECT message_id, body FROM rabbit_inbox_outbox ORDER BY id");
    expect(outbox.map((r) => text(r.message_id))).toEqual([
      outboxMessageId(source, 0),
      outboxMessageId({ ...source, version: fingerprintOf(corrected) }, 0),
    ]);
    expect(outbox.map((r) => JSON.parse(text(r.body)) as unknown)).toEqual([{ event_id: "d-1", amount: 100 }, { event_id: "d-1", amount: 150 }]);
    expect(keys).toHaveLength(2);
    expect(keys[1]).not.toBe(keys[0]);
    expect((await f.dedup()).get("d-1")).toBe(fingerprintOf(corrected));
  });
});
