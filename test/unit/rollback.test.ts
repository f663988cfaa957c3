/**
 * transactionOrRollBack: a transaction's work asks for COMMIT or ROLLBACK with a value, and the
 * caller gets a value back either way. A rollback must leave nothing behind (no dedup record,
 * no business write, no before-commit hook run), and any other error must reach the caller as
 * it was thrown, so the failure table sees its real kind.
 */
import { describe, expect, it } from "vitest";
import { TransientStoreError } from "../../src/core/errors.js";
import { transactionOrRollBack } from "../../src/core/rollback.js";
import type { StoreTransaction } from "../../src/core/store-contract/store.js";
import { classifyMysqlError } from "../../src/store/mysql/errors.js";
import { classifyPostgresError } from "../../src/store/postgres/errors.js";
import { classifySqliteError } from "../../src/store/sqlite/errors.js";
import { type MemoryHandle, MemoryStore } from "../support/memory-store.js";

const key = { tenant: "t1", eventId: "e-1" };

describe("transactionOrRollBack", () => {
  it("commits what the work wrote when it asks to, and returns its value", async () => {
    const store = new MemoryStore();
    const hooks: string[] = [];
    const result = await transactionOrRollBack(store, async (tx) => {
      await tx.claim("h", [{ key, fingerprint: "f" }]);
      tx.handle.effects.push("credited");
      return { commit: "done" };
    }, () => { hooks.push("before-commit"); });
    expect(result).toEqual({ commit: "done" });
    expect(store.effects).toEqual(["credited"]);
    expect(await store.countInbox("h")).toBe(1);
    expect(hooks).toEqual(["before-commit"]);
  });

  it("rolls back what the work wrote when it asks to, and returns what it learned; the before-commit hook never runs", async () => {
    const store = new MemoryStore();
    const hooks: string[] = [];
    const result = await transactionOrRollBack(store, async (tx) => {
      await tx.claim("h", [{ key, fingerprint: "f" }]);
      tx.handle.effects.push("credited");
      return { rollBack: [{ index: 0, reason: "account_missing" }] };
    }, () => { hooks.push("before-commit"); });
    expect(result).toEqual({ rollBack: [{ index: 0, reason: "account_missing" }] });
    expect(store.effects).toEqual([]);
    expect(await store.countInbox("h")).toBe(0);
    expect(store.transactions).toBe(1);
    expect(hooks).toEqual([]);
  });

  it("passes any other error on as it was thrown, with nothing committed", async () => {
    const store = new MemoryStore();
    const deadlock = new TransientStoreError("deadlock detected");
    const outcome = await transactionOrRollBack(store, (tx) => {
      tx.handle.effects.push("credited");
      return Promise.reject(deadlock);
    }).then(() => null, (error: unknown) => error);
    expect(outcome).toBe(deadlock);
    expect(store.effects).toEqual([]);
  });

  it("a rollback asked by one transaction is not taken for another's: each call has its own signal", async () => {
    const store = new MemoryStore();
    const [a, b] = await Promise.all([
      transactionOrRollBack(store, () => Promise.resolve({ rollBack: "a" })),
      transactionOrRollBack(store, () => Promise.resolve({ commit: "b" })),
    ]);
    expect([a, b]).toEqual([{ rollBack: "a" }, { commit: "b" }]);
  });

  it("a rollback whose ROLLBACK itself fails: the store's error reaches the caller, not the rollback's value", async () => {
    const lost = new TransientStoreError("connection lost during ROLLBACK", { kind: "connection" });
    const seen: unknown[] = [];
    class FailingRollbackStore extends MemoryStore {
      override async transaction<T>(work: (tx: StoreTransaction<MemoryHandle>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
        try {
          return await super.transaction(work, beforeCommit);
        } catch (error) {
          seen.push(error);
          throw lost;
        }
      }
    }
    const outcome = await transactionOrRollBack(new FailingRollbackStore(), () => Promise.resolve({ rollBack: "refused" })).then(() => null, (error: unknown) => error);
    expect(outcome).toBe(lost);
    // What the store saw go through it says what it is, for a store that logs it.
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ name: "RollbackSignal", message: expect.stringMatching(/^rolled back on purpose: /) as unknown });
  });

  it.each([
    ["PostgreSQL", (e: unknown) => classifyPostgresError(e, false)],
    ["PostgreSQL, during COMMIT", (e: unknown) => classifyPostgresError(e, true)],
    ["MySQL", (e: unknown) => classifyMysqlError(e, false)],
    ["MySQL, during COMMIT", (e: unknown) => classifyMysqlError(e, true)],
    ["SQLite", classifySqliteError],
  ] as const)("a rollback survives the %s store's error classification (never taken for a lost connection)", async (_name, classify) => {
    class ClassifyingStore extends MemoryStore {
      override async transaction<T>(work: (tx: StoreTransaction<MemoryHandle>) => Promise<T>, beforeCommit?: () => Promise<void> | void): Promise<T> {
        try {
          return await super.transaction(work, beforeCommit);
        } catch (error) {
          throw classify(error);
        }
      }
    }
    const store = new ClassifyingStore();
    expect(await transactionOrRollBack(store, () => Promise.resolve({ rollBack: "refused" }))).toEqual({ rollBack: "refused" });
  });
});
