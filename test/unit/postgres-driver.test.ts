import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { TransientStoreError } from "../../src/core/errors.js";
import { type PgClient, type PgPool, PostgresStore } from "../../src/store/postgres/index.js";
import { CLAIM_SAVEPOINT } from "../../src/store/postgres/claim.js";
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
