import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { TransientStoreError } from "../../src/core/errors.js";
import { type PgClient, type PgPool, PostgresStore } from "../../src/store/postgres/index.js";
import { CLAIM_SAVEPOINT } from "../../src/store/postgres/claim.js";
import { OUTBOX_SAVEPOINT } from "../../src/store/postgres/outbox.js";
import type { OutboxRecord } from "../../src/core/store-contract/store.js";
import type { HandedOffRow } from "../../src/core/store-contract/outbox-signal.js";
import { PostgresSession } from "../../src/store/postgres/session.js";
import { silentLogger } from "../../src/core/logger.js";
import { type LogLine, logged, recordingLogger } from "../support/recording-logger.js";

/** What the store sends to open a transaction: BEGIN and the batch claim's savepoint, no value in it. */
const BEGIN = "BEGIN; SAVEPOINT rabbit_inbox_claim";

/**
 * A pg client as node-postgres builds it: an EventEmitter that emits 'error' when its connection
 * ends unexpectedly, even while a query is in flight (the query is rejected as well).
 */
class FakeClient extends EventEmitter {
  readonly sent: string[] = [];
  readonly released: Array<boolean | Error | undefined> = [];
  constructor(private readonly answer: (text: string) => Promise<unknown>) {
    super();
  }
  query(config: string | { text: string }): Promise<unknown> {
    const text = typeof config === "string" ? config : config.text;
    this.sent.push(text);
    return this.answer(text);
  }
  release(destroy?: boolean | Error): void {
    this.released.push(destroy);
  }
}

function storeOver(client: FakeClient, lines: LogLine[] = []): PostgresStore {
  const pool: PgPool = {
    connect: () => Promise.resolve(client as unknown as PgClient),
    end: () => Promise.resolve(),
    on: () => pool,
  };
  return new PostgresStore({ pool, logger: recordingLogger(lines) });
}

describe("PostgresDriver (the store's own pool)", () => {
  it("a session that ends during a read is a classified connection loss, and the client is destroyed, not an uncaught 'error'", async () => {
    const client = new FakeClient(() => new Promise((_resolve, reject) => {
      setImmediate(() => {
        const error = new Error("Connection terminated unexpectedly");
        // node-postgres: both the 'error' event and the query's rejection.
        client.emit("error", error);
        reject(error);
      });
    }));
    const failed = await storeOver(client).countInbox("h").then(() => null, (error: unknown) => error);
    expect(failed).toBeInstanceOf(TransientStoreError);
    expect((failed as TransientStoreError).kind).toBe("connection");
    expect(client.released).toEqual([true]);
    // The listener is gone with the client: nothing of the store stays attached to it.
    expect(client.listenerCount("error")).toBe(0);
  });

  it("BEGIN (with the claim's savepoint, one round trip) is answered before the work runs; COMMIT ends it, and the client goes back whole", async () => {
    const client = new FakeClient(() => Promise.resolve({ rows: [], rowCount: 0 }));
    const result = await storeOver(client).transaction(() => {
      expect(client.sent).toEqual([BEGIN]);
      return Promise.resolve("done");
    });
    expect(result).toBe("done");
    expect(client.sent).toEqual([BEGIN, "COMMIT"]);
    expect(client.released).toEqual([false]);
    expect(client.listenerCount("error")).toBe(0);
  });

  it("the claim uses the savepoint BEGIN opened only while nothing ran after it; later it opens its own", async () => {
    const client = new FakeClient(() => Promise.resolve({ rows: [], rowCount: 0 }));
    const session = () => new PostgresSession({ client: client as unknown as PgClient, lost: false, onLost: undefined, release: () => undefined }, silentLogger);
    const claim = { text: "INSERT claim", values: [] };
    const first = session();
    await first.begin();
    await first.queryInSavepoint(CLAIM_SAVEPOINT, claim);
    expect(client.sent.splice(0)).toEqual([BEGIN, "INSERT claim"]);
    // A statement in between: rolling back to BEGIN's savepoint would undo it too.
    const second = session();
    await second.begin();
    await second.query({ text: "UPDATE other", values: [] });
    await second.queryInSavepoint(CLAIM_SAVEPOINT, claim);
    expect(client.sent.splice(0)).toEqual([BEGIN, "UPDATE other", `SAVEPOINT ${CLAIM_SAVEPOINT}`, "INSERT claim"]);
    // The handler's own client counts as a statement in between, and another savepoint name never reuses BEGIN's.
    const third = session();
    await third.begin();
    void third.handle;
    await third.queryInSavepoint(CLAIM_SAVEPOINT, claim);
    const fourth = session();
    await fourth.begin();
    await fourth.queryInSavepoint("other_savepoint", claim);
    expect(client.sent.splice(0)).toEqual([BEGIN, `SAVEPOINT ${CLAIM_SAVEPOINT}`, "INSERT claim", BEGIN, "SAVEPOINT other_savepoint", "INSERT claim"]);
  });

  it("a BEGIN the server refuses (a cancel) runs no work: the handler's statement is never sent, so it cannot commit on its own", async () => {
    let answerBegin!: (error: Error) => void;
    const client = new FakeClient((text) => (text === BEGIN
      ? new Promise((_resolve, reject) => { answerBegin = reject; })
      : Promise.resolve({ rows: [], rowCount: 1 })));
    let ran = false;
    const running = storeOver(client).transaction(async (tx) => {
      ran = true;
      await tx.handle.query("INSERT INTO effects VALUES ('x')");
    }).then(() => null, (error: unknown) => error);
    // node-postgres would send whatever is queued once BEGIN is answered, even by an error.
    await new Promise((resolve) => setImmediate(resolve));
    expect(client.sent).toEqual([BEGIN]);
    answerBegin(Object.assign(new Error("canceling statement due to user request"), { code: "57014" }));
    expect(await running).toBeInstanceOf(TransientStoreError);
    expect(ran).toBe(false);
    expect(client.sent.filter((text) => text !== BEGIN && text !== "ROLLBACK")).toEqual([]);
    expect(client.released).toEqual([false]);
  });

  it("a COMMIT answered by ROLLBACK is a TransientStoreError: nothing is reported committed, no ROLLBACK follows", async () => {
    const client = new FakeClient((text) => Promise.resolve(
      text === "COMMIT" ? { command: "ROLLBACK", rows: [], rowCount: null }
        : text.includes("redeliveries") ? { rows: [{ redeliveries: 0 }], rowCount: 1 } : { rows: [], rowCount: 0 },
    ));
    const failed = await storeOver(client).transaction((tx) => tx.countRedelivery!("h", { tenant: "t", eventId: "e" }))
      .then(() => null, (error: unknown) => error);
    expect(failed).toBeInstanceOf(TransientStoreError);
    expect((failed as Error).message).toContain("aborted by an earlier failed statement");
    expect(client.sent.at(-1)).toBe("COMMIT");
    expect(client.sent.filter((text) => text === "ROLLBACK")).toEqual([]);
    expect(client.released).toEqual([false]);
  });

  it("a session lost between a transaction's statements is logged once, fails the transaction and destroys the client", async () => {
    const client = new FakeClient((text) => Promise.resolve(
      text.includes("redeliveries") ? { rows: [{ redeliveries: 1 }], rowCount: 1 } : { rows: [], rowCount: 0 },
    ));
    const lines: LogLine[] = [];
    const failed = await storeOver(client, lines).transaction(async (tx) => {
      await tx.countRedelivery!("h", { tenant: "t", eventId: "e" });
      client.emit("error", new Error("terminating connection due to administrator command"));
      throw Object.assign(new Error("Connection terminated unexpectedly"), { code: "57P01" });
    }).then(() => null, (error: unknown) => error);
    expect(failed).toBeInstanceOf(TransientStoreError);
    expect(logged(lines, "PostgreSQL session lost during a transaction")).toHaveLength(1);
    // No ROLLBACK on a lost session, and the client is not given back to the pool.
    expect(client.sent.filter((text) => text === "ROLLBACK")).toEqual([]);
    expect(client.released).toEqual([true]);
    expect(client.listenerCount("error")).toBe(0);
  });
});

describe("PostgresStore's leased outbox write (rows handed to a relay in memory)", () => {
  const record = (messageId: string): OutboxRecord => ({
    messageId, exchange: "x", routingKey: "rk", body: Buffer.from(messageId), properties: "{}", orderingKey: "k", source: null,
  });
  /** A client whose outbox INSERTs answer `insert(text)`; everything else succeeds with no row. */
  function clientAnswering(insert: (text: string) => Promise<unknown>): FakeClient {
    return new FakeClient((text) => (text.includes("INSERT INTO rabbit_inbox_outbox") ? insert(text) : Promise.resolve({ rows: [], rowCount: 0 })));
  }
  const inserted = (id: number, messageId: string) => Promise.resolve({ rows: [{ id: String(id), message_id: messageId, previous: null }], rowCount: 1 });
  const uniqueViolation = () => Promise.reject(Object.assign(new Error("duplicate key value violates unique constraint"), { code: "23505" }));
  /** What the client was sent, each outbox INSERT named by its conflict clause. */
  const sentOf = (client: FakeClient) => client.sent.map((text) => (text.includes("INSERT INTO rabbit_inbox_outbox")
    ? (text.includes("ON CONFLICT") ? "INSERT ON CONFLICT" : "INSERT") : text));

  async function writeInOneTransaction(client: FakeClient, ...writes: string[][]): Promise<HandedOffRow[]> {
    const store = storeOver(client);
    const taken: HandedOffRow[] = [];
    store.outboxSignal.attach({ leaseMs: 60_000, take: (rows) => { taken.push(...rows); } });
    await store.transaction(async (tx) => {
      for (const ids of writes) await tx.writeOutbox!(ids.map(record));
    });
    return taken;
  }

  it("a transaction's first write is a plain INSERT in a savepoint of its own; its later writes take the ON CONFLICT form, with no savepoint", async () => {
    let id = 0;
    const client = clientAnswering(() => inserted(++id, `m${id}`));
    const taken = await writeInOneTransaction(client, ["m1"], ["m2"]);
    expect(sentOf(client)).toEqual([BEGIN, `SAVEPOINT ${OUTBOX_SAVEPOINT}`, "INSERT", "INSERT ON CONFLICT", "COMMIT"]);
    expect(taken.map((r) => [r.id, r.record.messageId])).toEqual([[1, "m1"], [2, "m2"]]);
  });

  it("a message id already there (23505) rolls back to that savepoint only, then the ON CONFLICT form writes the rest; each transaction starts afresh", async () => {
    let attempts = 0;
    const client = clientAnswering((text) => (text.includes("ON CONFLICT") ? inserted(7, "m2") : (++attempts, uniqueViolation())));
    const taken = await writeInOneTransaction(client, ["m1", "m2"]);
    expect(sentOf(client)).toEqual([BEGIN, `SAVEPOINT ${OUTBOX_SAVEPOINT}`, "INSERT", `ROLLBACK TO SAVEPOINT ${OUTBOX_SAVEPOINT}`, "INSERT ON CONFLICT", "COMMIT"]);
    expect(taken.map((r) => [r.id, r.record.messageId])).toEqual([[7, "m2"]]);
    // The store's next transaction is new: its first write tries the fast path again.
    client.sent.splice(0);
    await writeInOneTransaction(client, ["m3"]);
    expect(sentOf(client)).toEqual([BEGIN, `SAVEPOINT ${OUTBOX_SAVEPOINT}`, "INSERT", `ROLLBACK TO SAVEPOINT ${OUTBOX_SAVEPOINT}`, "INSERT ON CONFLICT", "COMMIT"]);
    expect(attempts).toBe(2);
  });

  it("any other error of the fast path fails the transaction: no second write, nothing handed over", async () => {
    const client = clientAnswering(() => Promise.reject(Object.assign(new Error("value too long"), { code: "22001" })));
    const store = storeOver(client);
    const taken: HandedOffRow[] = [];
    store.outboxSignal.attach({ leaseMs: 60_000, take: (rows) => { taken.push(...rows); } });
    await expect(store.transaction(async (tx) => { await tx.writeOutbox!([record("m1")]); })).rejects.toThrow("value too long");
    expect(sentOf(client)).toEqual([BEGIN, `SAVEPOINT ${OUTBOX_SAVEPOINT}`, "INSERT", "ROLLBACK"]);
    expect(taken).toEqual([]);
  });
});
