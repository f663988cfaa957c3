import { writeSync } from "node:fs";
import { InboxConfigError } from "../core/errors.js";
import type { EventKey } from "../core/event.js";
import type { FaultPoint, PipelineHook } from "../core/pipeline.js";

export type FaultAction = "crash" | "pause";

/** `<point>:<action>[:<nth>]`, e.g. `after-commit:crash:3`. */
export interface FaultSpec {
  point: FaultPoint;
  action: FaultAction;
  /** The Nth delivery reaching the point triggers the fault (1-based). */
  nth: number;
}

const POINTS: readonly FaultPoint[] = ["before-commit", "after-commit", "after-ack"];
const ACTIONS: readonly FaultAction[] = ["crash", "pause"];

/** Exit code of an injected crash, so a drill can tell it from a real failure. */
export const FAULT_CRASH_EXIT_CODE = 70;

export function parseFaultSpec(text: string): FaultSpec {
  const [point, action, nthText, ...rest] = text.trim().split(":");
  if (!POINTS.includes(point as FaultPoint) || !ACTIONS.includes(action as FaultAction) || rest.length > 0) {
    throw new InboxConfigError(
      `invalid fault ${JSON.stringify(text)}: expected <point>:<action>[:<nth>] with point one of ${POINTS.join(", ")} and action one of ${ACTIONS.join(", ")}`,
    );
  }
  const nth = nthText === undefined ? 1 : Number(nthText);
  if (!Number.isSafeInteger(nth) || nth < 1) throw new InboxConfigError(`invalid fault ${JSON.stringify(text)}: nth must be a positive integer`);
  return { point: point as FaultPoint, action: action as FaultAction, nth };
}

/**
 * A pipeline hook that injects one fault: at the Nth delivery reaching `point`, `crash` exits
 * the process at once with code 70 (no ack, no cleanup) and `pause` prints
 * `fault: paused at <point> <event_id>` on stdout and stops all work until the process is
 * killed. This is the kit for proving the failure windows against a real deployment.
 */
export function faultInjection(spec: FaultSpec | string, options: { exit?: (code: number) => never; print?: (line: string) => void } = {}): PipelineHook {
  const fault = typeof spec === "string" ? parseFaultSpec(spec) : spec;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const print = options.print ?? ((line: string) => { writeSync(1, line + "\n"); });
  let reached = 0;
  let frozen: Promise<never> | undefined;
  return (point: FaultPoint, keys: ReadonlyArray<EventKey | null>) => {
    if (frozen) return frozen;
    if (point !== fault.point) return;
    const before = reached;
    reached += keys.length;
    if (before >= fault.nth || reached < fault.nth) return;
    const key = keys[fault.nth - before - 1] ?? null;
    if (fault.action === "crash") {
      exit(FAULT_CRASH_EXIT_CODE);
      return; // only reached when a test passes an exit() that returns
    }
    print(`fault: paused at ${point} ${key?.eventId ?? "-"}`);
    frozen = new Promise<never>(() => undefined);
    return frozen;
  };
}
