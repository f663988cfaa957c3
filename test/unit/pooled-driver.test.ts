import { describe, expect, it } from "vitest";
import { StoreUnavailableError, TransientStoreError } from "../../src/core/errors.js";
import { type PooledSession, PooledDriver } from "../../src/store/sql/pooled-driver.js";
import type { SqlQuery } from "../../src/store/sql/sql-query.js";

class ConnectionLost extends Error {}
/** What a dialect classifies as a refusal of the database (read-only, disk full...). */
class Refused extends Error {}
class Classified extends Error {
  constructor(readonly original: unknown, readonly duringCommit: boolean) {
    super("classified");
  }
}

interface Script {
  failBegin?: boolean;
  failCommit?: Error;
  failRollback?: boolean;
  brokenBySession?: boolean;
}

/** A driver over one scripted connection that records every step the lifecycle takes. */
class ScriptedDriver extends PooledDriver<string, string> {
  readonly steps: string[] = [];
  constructor(private readonly script: Script = {}) {
    super();
  }
  protected acquire(): Promise<string> {
    this.steps.push("acquire");
    return Promise.resolve("conn");
  }
  protected release(_connection: string, broken: boolean): void {
    this.steps.push(broken ? "destroy" : "release");
  }
  protected startSession(): PooledSession<string> {
    const steps = this.steps;
    const script = this.script;
    return {
      handle: "handle",
      query: () => Promise.resolve({ rows: [], affected: 0 }),
      begin: () => { steps.push("begin"); return script.failBegin ? Promise.reject(new Error("begin failed")) : Promise.resolve(); },
      commit: () => { steps.push("commit"); return script.failCommit ? Promise.reject(script.failCommit) : Promise.resolve(); },
      rollback: (afterCommit) => { steps.push(`rollback${afterCommit ? " after commit" : ""}`); return Promise.resolve(!script.failRollback); },
      get broken() { return script.brokenBySession ?? false; },
      end: () => { steps.push("end"); },
    };
  }
  protected autocommit(): SqlQuery {
    return () => Promise.resolve({ rows: [{ n: 1 }], affected: 0 });
  }
  protected isConnectionLoss(error: unknown): boolean {
    return error instanceof ConnectionLost;
  }
  protected classify(error: unknown, duringCommit: boolean, connection?: string): unknown {
    if (error instanceof Refused) return new StoreUnavailableError("read-only", `refused on ${connection}`, { node: `${connection}:1` });
    if (error instanceof ConnectionLost) return new TransientStoreError("gone", { kind: "connection" });
    return new Classified(error, duringCommit);
  }
  protected override nodeOf(connection: string): string | null {
    return `${connection}:1`;
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

describe("PooledDriver: the transaction lifecycle every pooled database shares", () => {
  it("begins, runs the work and the hook, commits, and gives the connection back", async () => {
    const driver = new ScriptedDriver();
    const result = await driver.transaction(async (session) => {
      driver.steps.push(`work ${session.handle}`);
      return Promise.resolve(42);
    }, () => { driver.steps.push("hook"); });
    expect(result).toBe(42);
    expect(driver.steps).toEqual(["acquire", "begin", "work handle", "hook", "commit", "end", "release"]);
  });

  it("rolls back a failed work and rethrows it classified, not during commit; no commit is sent", async () => {
    const driver = new ScriptedDriver();
    const failure = new Error("handler failed");
    const error = await driver.transaction(() => Promise.reject(failure)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Classified);
    expect((error as Classified).original).toBe(failure);
    expect((error as Classified).duringCommit).toBe(false);
    expect(driver.steps).toEqual(["acquire", "begin", "rollback", "end", "release"]);
  });

  it("a hook that throws rolls back: nothing commits", async () => {
    const driver = new ScriptedDriver();
    await expect(driver.transaction(() => Promise.resolve(1), () => { throw new Error("crash point"); })).rejects.toBeInstanceOf(Classified);
    expect(driver.steps).not.toContain("commit");
    expect(driver.steps).toContain("rollback");
  });

  it("a failed COMMIT is classified as during commit, and the session decides about its rollback", async () => {
    const driver = new ScriptedDriver({ failCommit: new Error("commit failed") });
    const error = await driver.transaction(() => Promise.resolve(1)).catch((e: unknown) => e);
    expect((error as Classified).duringCommit).toBe(true);
    expect(driver.steps).toEqual(["acquire", "begin", "commit", "rollback after commit", "end", "release"]);
  });

  it("never rolls back on a lost connection, and destroys it instead of returning it to the pool", async () => {
    const driver = new ScriptedDriver();
    await expect(driver.transaction(() => Promise.reject(new ConnectionLost("gone")))).rejects.toBeInstanceOf(TransientStoreError);
    expect(driver.steps).toEqual(["acquire", "begin", "end", "destroy"]);
  });

  it("destroys the connection when the rollback failed", async () => {
    const driver = new ScriptedDriver({ failRollback: true });
    await expect(driver.transaction(() => Promise.reject(new Error("x")))).rejects.toBeInstanceOf(Classified);
    expect(driver.steps.at(-1)).toBe("destroy");
  });

  it("destroys a connection the session saw break even when the work succeeded", async () => {
    const driver = new ScriptedDriver({ brokenBySession: true });
    await driver.transaction(() => Promise.resolve(1));
    expect(driver.steps.at(-1)).toBe("destroy");
  });

  it("a failed BEGIN runs no work", async () => {
    const driver = new ScriptedDriver({ failBegin: true });
    let ran = false;
    await expect(driver.transaction(() => { ran = true; return Promise.resolve(1); })).rejects.toBeInstanceOf(Classified);
    expect(ran).toBe(false);
    expect(driver.steps).not.toContain("commit");
  });

  it("read runs outside a transaction and classifies its errors; a lost connection is destroyed", async () => {
    const driver = new ScriptedDriver();
    expect(await driver.read(async (query) => (await query({ text: "SELECT 1", values: [] })).rows)).toEqual([{ n: 1 }]);
    expect(driver.steps).toEqual(["acquire", "release"]);
    await expect(driver.read(() => Promise.reject(new ConnectionLost("gone")))).rejects.toBeInstanceOf(TransientStoreError);
    expect(driver.steps.slice(2)).toEqual(["acquire", "destroy"]);
    expect(driver.steps).not.toContain("begin");
  });

  it("a refusal of the database rolls back, then destroys the connection (a new one may reach another node, or a writable database)", async () => {
    const driver = new ScriptedDriver();
    const error = await driver.transaction(() => Promise.reject(new Refused("25006"))).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "RI_STORE_UNAVAILABLE", node: "conn:1" });
    expect(driver.steps).toEqual(["acquire", "begin", "rollback", "end", "destroy"]);
    await expect(driver.read(() => Promise.reject(new Refused("25006")))).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(driver.steps.at(-1)).toBe("destroy");
  });

  it("keeps what its transactions met: an outage (refusal or lost connection) with its node, reason and start; the node of each success", async () => {
    const driver = new ScriptedDriver();
    expect(driver.health.snapshot()).toEqual({ available: true, node: null, problem: null });
    await driver.transaction(() => Promise.resolve(1));
    expect(driver.health.snapshot()).toEqual({ available: true, node: "conn:1", problem: null });
    await driver.transaction(() => Promise.reject(new Refused("25006"))).catch(() => undefined);
    const refused = driver.health.snapshot();
    expect(refused).toMatchObject({ available: false, node: "conn:1", problem: { code: "RI_STORE_UNAVAILABLE", reason: "read-only", message: "refused on conn" } });
    await driver.transaction(() => Promise.reject(new ConnectionLost("gone"))).catch(() => undefined);
    // The outage goes on: it started at the refusal.
    expect(driver.health.snapshot().problem).toMatchObject({ code: "RI_STORE_CONNECTION_LOST", reason: null, since: refused.problem!.since });
    // A handler's own failure says nothing about the database; nor does a transaction that may only have read.
    await driver.transaction(() => Promise.reject(new Error("handler bug"))).catch(() => undefined);
    await driver.transaction(() => Promise.resolve(1));
    expect(driver.health.snapshot().available).toBe(false);
    // The store says when a transaction that wrote committed.
    driver.health.committed();
    expect(driver.health.snapshot()).toEqual({ available: true, node: "conn:1", problem: null });
  });
});
