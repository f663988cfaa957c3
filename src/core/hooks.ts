import type { EventKey } from "./event.js";

/** The three failure windows (before commit, after commit before the ack, after the ack), as points where a test or a drill can inject a fault. */
export type FaultPoint = "before-commit" | "after-commit" | "after-ack";

/**
 * Called by the pipeline at each failure window with one entry per delivery of the batch (null when the message could not be identified)
 * reaching it. A hook may throw (before-commit: rolls back), exit the process, or never resolve.
 */
export type PipelineHook = (point: FaultPoint, keys: ReadonlyArray<EventKey | null>) => Promise<void> | void;
