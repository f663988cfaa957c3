/**
 * NodeSelector over scripted nodes: which node a multi-host URL's pool hands connections from,
 * when it checks a node's role, and what it throws when no node fits. The engines themselves
 * (PostgreSQL with a standby, Patroni, Galera) are in test/ha.
 */
import { describe, expect, it } from "vitest";
import { StoreUnavailableError, TransientStoreError } from "../../src/core/errors.js";
import type { ServerNode, TargetSessionAttrs } from "../../src/store/host-list.js";
import { type NodePools, type NodeRole, NodeSelector, fits } from "../../src/store/sql/node-selector.js";
import { type LogLine, collectingLogger } from "../support/sqlite-effects.js";

interface FakeNode {
  role: NodeRole | "down" | "refuses";
}

class FakeConnection {
  constructor(readonly node: string) {}
}

/** Nodes whose role a test changes at will; records every borrow, role check, destroy and pool end. */
function fakePools(nodes: Record<string, FakeNode>) {
  const events: string[] = [];
  const idle = new Map<string, FakeConnection[]>();
  const pools: NodePools<FakeConnection> = {
    database: "TestDB",
    borrow(node: ServerNode) {
      events.push(`borrow ${node.label}`);
      if (nodes[node.label]!.role === "down") return Promise.reject(Object.assign(new Error(`connect ECONNREFUSED ${node.label}`), { code: "ECONNREFUSED" }));
      return Promise.resolve(idle.get(node.label)?.pop() ?? new FakeConnection(node.label));
    },
    role(connection) {
      events.push(`role ${connection.node}`);
      const role = nodes[connection.node]!.role;
      if (role === "refuses") return Promise.reject(new StoreUnavailableError("not-ready", `${connection.node} is starting up`, { node: connection.node }));
      if (role === "down") return Promise.reject(new Error("connection terminated"));
      return Promise.resolve(role);
    },
    giveBack(connection, destroy) {
      events.push(`${destroy ? "destroy" : "release"} ${connection.node}`);
      if (!destroy) idle.set(connection.node, [...(idle.get(connection.node) ?? []), connection]);
    },
    closeNode(node) {
      events.push(`end ${node.label}`);
      idle.delete(node.label);
    },
    classify: (error) => (error instanceof StoreUnavailableError ? error : new TransientStoreError(`cannot connect: ${(error as Error).message}`, { kind: "connection", cause: error })),
  };
  return { pools, events };
}

const primary: NodeRole = { readOnly: false, standby: false };
const standby: NodeRole = { readOnly: true, standby: true };
const readOnlyPrimary: NodeRole = { readOnly: true, standby: false };
const list = (...labels: string[]): ServerNode[] => labels.map((label) => ({ label, url: `x://${label}` }));

function selector(nodes: Record<string, FakeNode>, target: TargetSessionAttrs = "read-write") {
  const { pools, events } = fakePools(nodes);
  const lines: LogLine[] = [];
  return { selector: new NodeSelector(list(...Object.keys(nodes)), target, pools, collectingLogger(lines)), events, lines };
}

describe("NodeSelector", () => {
  it("tries the nodes in order, keeps the first that fits, and checks each new connection once", async () => {
    const { selector: s, events, lines } = selector({ a: { role: standby }, b: { role: primary }, c: { role: primary } });
    const first = await s.borrow();
    expect(first.node).toBe("b");
    expect(s.node).toBe("b");
    // a is a standby: skipped and its pool ended; c never asked.
    expect(events).toEqual(["borrow a", "role a", "release a", "end a", "borrow b", "role b", "release b", "borrow b"]);
    expect(lines.map((l) => [l.message, l.fields])).toEqual([
      ["database node chosen", { database: "TestDB", node: "b", targetSessionAttrs: "read-write", skipped: ["a is a standby (in recovery)"] }],
    ]);
    events.length = 0;
    // A connection checked before goes out unchecked; a new one is checked.
    const second = await s.borrow();
    expect(second).not.toBe(first);
    expect(events).toEqual(["borrow b", "role b"]);
  });

  it("after a destroyed session (suspect), checks the next connection, leaves a node that turned read-only, and finds the new writable one", async () => {
    const nodes: Record<string, FakeNode> = { a: { role: primary }, b: { role: standby } };
    const { selector: s, events, lines } = selector(nodes);
    expect((await s.borrow()).node).toBe("a");
    // Failover: a was demoted, b promoted.
    nodes.a!.role = readOnlyPrimary;
    nodes.b!.role = primary;
    // Without a suspicion the checked connection is trusted (the store's refusal destroys it and says so).
    s.suspect();
    events.length = 0;
    expect((await s.borrow()).node).toBe("b");
    expect(events.slice(0, 4)).toEqual(["borrow a", "role a", "destroy a", "end a"]);
    expect(lines.map((l) => l.message)).toEqual(["database node chosen", "database node left", "database node chosen"]);
    expect(lines[1]!.fields).toMatchObject({ node: "a", reason: "is read-only" });
  });

  it("a node that cannot be reached is left and the next one searched; the search is shared by concurrent borrowers", async () => {
    const nodes: Record<string, FakeNode> = { a: { role: primary }, b: { role: primary } };
    const { selector: s, events } = selector(nodes);
    await s.borrow();
    nodes.a!.role = "down";
    events.length = 0;
    const connections = await Promise.all([s.borrow(), s.borrow(), s.borrow()]);
    expect(connections.map((c) => c.node)).toEqual(["b", "b", "b"]);
    // Each borrower met a down once; one search then tried a and chose b, for all three.
    expect(events.filter((e) => e === "borrow a")).toHaveLength(4);
    expect(events.filter((e) => e.startsWith("borrow b"))).toHaveLength(4);
  });

  it("no node accepts writes: a StoreUnavailableError (read-only) naming the first that refused and every node's state", async () => {
    const { selector: s } = selector({ a: { role: "down" }, b: { role: standby }, c: { role: readOnlyPrimary } });
    const error = await s.borrow().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error).toMatchObject({ code: "RI_STORE_UNAVAILABLE", kind: "connection", reason: "read-only", node: "b" });
    expect((error as Error).message).toBe("no TestDB node fits target_session_attrs=read-write: a cannot connect: cannot connect: connect ECONNREFUSED a; b is a standby (in recovery); c is read-only");
  });

  it("a node that refuses to answer (starting up) keeps its own reason", async () => {
    const error = await selector({ a: { role: "refuses" } }).selector.borrow().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "RI_STORE_UNAVAILABLE", reason: "not-ready", node: "a" });
  });

  it("no node can be reached: a lost-connection error (kind connection), never a refusal", async () => {
    const error = await selector({ a: { role: "down" }, b: { role: "down" } }).selector.borrow().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientStoreError);
    expect(error).toMatchObject({ code: "RI_STORE_CONNECTION_LOST", kind: "connection" });
    expect((error as Error).message).toMatch(/^no TestDB node fits target_session_attrs=read-write: a cannot connect: .*; b cannot connect/);
  });

  it("prefer-standby takes the first standby, else the first node that answered; standby and read-only refuse a primary", async () => {
    expect((await selector({ a: { role: primary }, b: { role: standby } }, "prefer-standby").selector.borrow()).node).toBe("b");
    expect((await selector({ a: { role: "down" }, b: { role: primary }, c: { role: primary } }, "prefer-standby").selector.borrow()).node).toBe("b");
    expect((await selector({ a: { role: primary }, b: { role: standby } }, "standby").selector.borrow()).node).toBe("b");
    const error = await selector({ a: { role: primary } }, "read-only").selector.borrow().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "RI_STORE_CONNECTION_LOST" });
  });

  it("fits: the role each target_session_attrs accepts", () => {
    const roles = { primary, standby, readOnlyPrimary };
    const table = Object.fromEntries((["any", "read-write", "read-only", "primary", "standby", "prefer-standby"] as const).map((t) => [t,
      Object.entries(roles).filter(([, r]) => fits(t, r)).map(([name]) => name)]));
    expect(table).toEqual({
      "any": ["primary", "standby", "readOnlyPrimary"],
      "read-write": ["primary"],
      "read-only": ["standby", "readOnlyPrimary"],
      "primary": ["primary", "readOnlyPrimary"],
      "standby": ["standby"],
      "prefer-standby": ["primary", "standby", "readOnlyPrimary"],
    });
  });
});
