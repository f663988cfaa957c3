import { describe, expect, it, vi } from "vitest";
import { InboxConfigError } from "../../src/core/errors.js";
import type { EventKey } from "../../src/core/event.js";
import { FAULT_CRASH_EXIT_CODE, faultInjection, parseFaultSpec } from "../../src/fault/fault-injection.js";

const key = (eventId: string): EventKey => ({ tenant: "t1", eventId });

/** process.exit never returns; the stand-in throws so the hook stops where the process would. */
class Exited extends Error {
  constructor(readonly code: number) {
    super(`exit(${code})`);
  }
}
function fakeExit() {
  return vi.fn((code: number): never => {
    throw new Exited(code);
  });
}

/** Resolves to "pending" when `promise` has not settled after a few turns of the event loop. */
async function stateOf(promise: unknown): Promise<"pending" | "settled"> {
  const timeout = new Promise<"pending">((resolve) => setTimeout(() => resolve("pending"), 30));
  return Promise.race([Promise.resolve(promise).then(() => "settled" as const, () => "settled" as const), timeout]);
}

describe("parseFaultSpec", () => {
  it("parses <point>:<action>[:<nth>]", () => {
    expect(parseFaultSpec("before-commit:crash")).toEqual({ point: "before-commit", action: "crash", nth: 1 });
    expect(parseFaultSpec("after-commit:pause:3")).toEqual({ point: "after-commit", action: "pause", nth: 3 });
    expect(parseFaultSpec(" after-ack:crash:12 ")).toEqual({ point: "after-ack", action: "crash", nth: 12 });
  });

  it("rejects unknown points, actions and extra parts with a message listing the valid ones", () => {
    for (const text of ["", "commit:crash", "after-commit:explode", "after-commit", "after-commit:crash:1:2", "AFTER-COMMIT:crash"]) {
      let error: unknown;
      try {
        parseFaultSpec(text);
      } catch (e) {
        error = e;
      }
      expect(error, text).toBeInstanceOf(InboxConfigError);
      expect((error as Error).message).toContain(`invalid fault ${JSON.stringify(text)}`);
      expect((error as Error).message).toContain("before-commit, after-commit, after-ack");
      expect((error as Error).message).toContain("crash, pause");
    }
  });

  it("rejects an nth that is not a positive integer", () => {
    for (const text of ["after-commit:crash:0", "after-commit:crash:-1", "after-commit:crash:1.5", "after-commit:crash:x", "after-commit:crash:", "after-commit:crash:1e400"]) {
      expect(() => parseFaultSpec(text), text).toThrow(/nth must be a positive integer/);
    }
  });
});

describe("faultInjection", () => {
  it("crash: exits with code 70 at the nth delivery reaching the point, counting across batches", async () => {
    const exit = fakeExit();
    const print = vi.fn();
    const hook = faultInjection("after-commit:crash:4", { exit, print });
    await hook("after-commit", [key("e-1"), key("e-2")]);
    await hook("before-commit", [key("e-3"), key("e-4"), key("e-5")]); // another point: not counted
    await hook("after-ack", [key("e-3")]);
    await hook("after-commit", [key("e-3")]);
    expect(exit).not.toHaveBeenCalled();
    expect(() => hook("after-commit", [key("e-4"), key("e-5")])).toThrow(Exited);
    expect(exit).toHaveBeenCalledTimes(1);
    expect(exit).toHaveBeenCalledWith(FAULT_CRASH_EXIT_CODE);
    expect(FAULT_CRASH_EXIT_CODE).toBe(70);
    expect(print).not.toHaveBeenCalled();
  });

  it("crash: triggers at the first delivery by default", () => {
    const exit = fakeExit();
    const hook = faultInjection({ point: "before-commit", action: "crash", nth: 1 }, { exit, print: vi.fn() });
    expect(() => hook("before-commit", [null])).toThrow(new Exited(70));
  });

  it("pause: prints `fault: paused at <point> <event_id>` of the nth delivery and never resolves", async () => {
    const exit = fakeExit();
    const print = vi.fn();
    const hook = faultInjection("after-commit:pause:3", { exit, print });
    expect(await stateOf(hook("after-commit", [key("e-1"), key("e-2")]))).toBe("settled");
    expect(print).not.toHaveBeenCalled();
    const paused = hook("after-commit", [key("e-3"), key("e-4")]);
    expect(print).toHaveBeenCalledTimes(1);
    expect(print).toHaveBeenCalledWith("fault: paused at after-commit e-3");
    expect(await stateOf(paused)).toBe("pending");
    expect(exit).not.toHaveBeenCalled();
  });

  it("pause: picks the right delivery inside a batch that crosses nth", () => {
    const print = vi.fn();
    const hook = faultInjection("before-commit:pause:5", { exit: fakeExit(), print });
    void hook("before-commit", [key("e-1"), key("e-2"), key("e-3")]);
    void hook("before-commit", [key("e-4"), key("e-5"), key("e-6")]);
    expect(print).toHaveBeenCalledWith("fault: paused at before-commit e-5");
  });

  it("pause: prints - when the delivery has no event id", () => {
    const print = vi.fn();
    const hook = faultInjection("before-commit:pause", { exit: fakeExit(), print });
    void hook("before-commit", [null, key("e-2")]);
    expect(print).toHaveBeenCalledWith("fault: paused at before-commit -");
  });

  it("pause: every later call, at any point, stays frozen and prints nothing more", async () => {
    const print = vi.fn();
    const hook = faultInjection("after-ack:pause", { exit: fakeExit(), print });
    void hook("after-ack", [key("e-1")]);
    for (const point of ["before-commit", "after-commit", "after-ack"] as const) {
      expect(await stateOf(hook(point, [key("e-9")])), point).toBe("pending");
    }
    expect(print).toHaveBeenCalledTimes(1);
  });

  it("does nothing before nth, and nothing at other points", async () => {
    const exit = fakeExit();
    const print = vi.fn();
    const hook = faultInjection("after-ack:crash:100", { exit, print });
    for (let i = 0; i < 99; i++) expect(await stateOf(hook("after-ack", [key(`e-${i}`)]))).toBe("settled");
    for (let i = 0; i < 200; i++) await hook("before-commit", [key(`x-${i}`)]);
    expect(exit).not.toHaveBeenCalled();
    expect(() => hook("after-ack", [key("e-100")])).toThrow(Exited);
  });

  it("rejects an invalid spec string when it is created", () => {
    expect(() => faultInjection("after-commit:nap")).toThrow(InboxConfigError);
  });
});
