/**
 * PostgreSQL's packing write as the store reads its answer, over a session that answers what
 * the test says: the one-row answer of the usual case mapped onto the records, the general form
 * when a message id repeats or is already used, and an answer that does not cover the write
 * refused rather than handed to the relay with holes in it.
 */
import { describe, expect, it } from "vitest";
import type { OutboxRecord } from "../../src/core/store-contract/store.js";
import type { SqlSession } from "../../src/store/sql/sql-driver.js";
import type { SqlStatement } from "../../src/store/sql/sql-query.js";
import { plainArrays } from "../../src/store/postgres/array-parameters.js";
import { PostgresOutboxWrites } from "../../src/store/postgres/outbox.js";

function record(messageId: string, orderingKey: string | null): OutboxRecord {
  return { messageId, exchange: "x", routingKey: "", body: Buffer.from(messageId), properties: "{}", orderingKey, source: null };
}

/** A session whose statements answer with `answer(name)`; it keeps the names it was sent. */
function session(answer: (name: string) => Array<Record<string, unknown>>) {
  const sent: string[] = [];
  const query = (statement: SqlStatement) => {
    sent.push(statement.name ?? statement.text);
    return Promise.resolve({ rows: answer(statement.name ?? ""), rowCount: 0 });
  };
  return { sent, session: { query, handle: undefined } as unknown as SqlSession<unknown> };
}

const writes = () => new PostgresOutboxWrites("", undefined, plainArrays);

describe("the packing write's answer", () => {
  it("maps one row onto the records: their ids in write order, each key's predecessor, the packed row", async () => {
    const { sent, session: s } = session(() => [{ packed_id: "7", ids: "[11,12,13]", previous: JSON.stringify([["k\"1", 4]]) }]);
    const rows = await writes().writeLeased(s, [record("a", "k\"1"), record("b", null), record("c", "k2")], 1000, true);
    expect(rows.map((r) => [r.id, r.record.messageId, r.previousUnsent, r.packedIn])).toEqual([[11, "a", 4, 7], [12, "b", null, 7], [13, "c", null, 7]]);
    expect(sent).toEqual(["ri_outbox_write_packed_distinct"]);
  });

  it("runs the general form when a message id repeats within the write, and when the usual form wrote nothing", async () => {
    const general = [{ id: "21", message_id: "a", previous: null, packed_id: "8" }];
    const repeated = session(() => general);
    expect((await writes().writeLeased(repeated.session, [record("a", null), record("a", null)], 1000, true)).map((r) => r.id)).toEqual([21]);
    expect(repeated.sent).toEqual(["ri_outbox_write_packed"]);
    const used = session((name) => (name === "ri_outbox_write_packed_distinct" ? [] : general));
    expect((await writes().writeLeased(used.session, [record("a", null), record("b", null)], 1000, true)).map((r) => r.id)).toEqual([21]);
    expect(used.sent).toEqual(["ri_outbox_write_packed_distinct", "ri_outbox_write_packed"]);
  });

  it("refuses an answer whose ids do not cover the write", async () => {
    const { session: s } = session(() => [{ packed_id: "7", ids: "[11]", previous: "[]" }]);
    await expect(writes().writeLeased(s, [record("a", null), record("b", null)], 1000, true)).rejects.toThrow("the packing write returned 1 ids for 2 messages");
  });
});
