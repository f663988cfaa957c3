/**
 * The relay's pipelined publishing, without a broker or a database: which rows of a claim go on
 * the wire and which are marked sent when a publish fails in the middle of a key, when a key
 * changes route, or when the channel changed between two claims; and how the pipeline overlaps
 * claims, continues keys after the rows still out, and stops overlapping after a failure.
 */
import { describe, expect, it } from "vitest";
import { ClaimPipeline, type ClaimsOut, type PipelineSteps } from "../../src/outbox/claim-pipeline.js";
import { keyStarts } from "../../src/outbox/ordered-claim.js";
import type { OutboxClaim, OutboxRow } from "../../src/core/store-contract/outbox-relay-store.js";
import { PublishedClaim, type StartPublish } from "../../src/outbox/published-claim.js";

function row(id: number, orderingKey: string | null, routingKey = "rk"): OutboxRow {
  return { id, messageId: `m-${id}`, exchange: "ex", routingKey, body: Buffer.from(String(id)), properties: {}, orderingKey, attempts: 0 };
}

function claimOf(rows: OutboxRow[]): OutboxClaim {
  return { rows, expiresAt: Infinity, settle: () => Promise.resolve() };
}

/** A broker stand-in: records publish order; each publish's confirm is settled by the test. */
class Wire {
  readonly order: number[] = [];
  private readonly pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  start: StartPublish = (r) => {
    this.order.push(r.id);
    return new Promise<void>((resolve, reject) => { this.pending.set(r.id, { resolve, reject }); });
  };
  confirm(...ids: number[]): void { for (const id of ids) this.pending.get(id)!.resolve(); }
  nack(id: number): void { this.pending.get(id)!.reject(new Error(`nacked ${id}`)); }
  confirmAll(): void { for (const [id] of this.pending) this.confirm(id); }
}

describe("a published claim", () => {
  it("puts every row on the wire at once, in id order, and marks them sent once confirmed", async () => {
    const wire = new Wire();
    const published = new PublishedClaim(claimOf([row(1, "a"), row(2, "b"), row(3, "a"), row(4, null)]), "ch", wire.start, undefined);
    expect(wire.order).toEqual([1, 2, 3, 4]);
    const last = (key: string) => published.lastPublished.get(key);
    expect([...published.lastPublished.keys()]).toEqual(["a", "b"]);
    expect([last("a"), last("b")].map((l) => ({ id: l?.id, exchange: l?.exchange, routingKey: l?.routingKey })))
      .toEqual([{ id: 3, exchange: "ex", routingKey: "rk" }, { id: 2, exchange: "ex", routingKey: "rk" }]);
    wire.confirmAll();
    const outcome = await published.outcome(new Set());
    expect(outcome.sent.map((r) => r.id)).toEqual([1, 2, 3, 4]);
    expect(outcome.failed).toEqual([]);
    expect([...outcome.broken]).toEqual([]);
  });

  it("a nack in the middle of a key: nothing after it of that key is marked sent, even confirmed; other keys are", async () => {
    const wire = new Wire();
    const published = new PublishedClaim(claimOf([row(1, "a"), row(2, "a"), row(3, "b"), row(4, "a"), row(5, null), row(6, "b")]), "ch", wire.start, undefined);
    wire.confirm(1, 3, 4, 5, 6);
    wire.nack(2);
    const outcome = await published.outcome(new Set());
    expect(outcome.sent.map((r) => r.id)).toEqual([1, 3, 5, 6]);
    // Only the failed row counts an attempt; row 4 is left pending, untouched, and goes out again after row 2.
    expect(outcome.failed.map((f) => [f.row.id, f.error])).toEqual([[2, "nacked 2"]]);
    expect([...outcome.broken]).toEqual(["a"]);
  });

  it("a key that failed in an earlier claim: none of its rows in this claim is marked, and it stays failed for the next", async () => {
    const wire = new Wire();
    const published = new PublishedClaim(claimOf([row(7, "a"), row(8, "c"), row(9, "a")]), "ch", wire.start, undefined);
    wire.confirmAll();
    const outcome = await published.outcome(new Set(["a", "z"]));
    expect(outcome.sent.map((r) => r.id)).toEqual([8]);
    expect(outcome.failed).toEqual([]);
    expect([...outcome.broken].sort()).toEqual(["a", "z"]);
  });

  it("a row of another route waits, with the rest of its key, and stops nothing: it was never published", async () => {
    const wire = new Wire();
    const rows = [row(1, "a", "late.1"), row(2, "a", "ok.1"), row(3, "a", "late.1"), row(4, "b", "ok.2")];
    const published = new PublishedClaim(claimOf(rows), "ch", wire.start, undefined);
    expect(wire.order).toEqual([1, 4]);
    expect(published.lastPublished.get("a")).toMatchObject({ id: 1, exchange: "ex", routingKey: "late.1" });
    wire.confirmAll();
    const outcome = await published.outcome(new Set());
    expect(outcome.sent.map((r) => r.id)).toEqual([1, 4]);
    expect(outcome.failed).toEqual([]);
    expect([...outcome.broken]).toEqual([]);
  });

  it("follows the route of the claim still out: a key's first row here waits when the last one out went elsewhere", () => {
    const wire = new Wire();
    const before = new Map([["a", { id: 5, exchange: "ex", routingKey: "other" }], ["b", { id: 6, exchange: "ex", routingKey: "rk" }]]);
    const published = new PublishedClaim(claimOf([row(7, "a"), row(8, "b"), row(9, "a")]), "ch", wire.start, before);
    expect(wire.order).toEqual([8]);
    expect(published.lastPublished.has("a")).toBe(false);
  });

  it("without key pipelining, one row of a key on the wire at a time: the next waits for a later claim, unordered rows all go", async () => {
    const wire = new Wire();
    const published = new PublishedClaim(claimOf([row(1, "a"), row(2, "b"), row(3, "a"), row(4, null), row(5, null), row(6, "b")]), "ch", wire.start, undefined, false);
    expect(wire.order).toEqual([1, 2, 4, 5]);
    wire.confirmAll();
    const outcome = await published.outcome(new Set());
    expect(outcome.sent.map((r) => r.id)).toEqual([1, 2, 4, 5]);
    expect(outcome.failed).toEqual([]);
    expect([...outcome.broken]).toEqual([]);
    // A claim taken while a key's row is still out sends nothing of that key, whatever the route.
    const next = new Wire();
    new PublishedClaim(claimOf([row(3, "a"), row(7, "c")]), "ch", next.start, new Map([["a", { id: 1, exchange: "ex", routingKey: "rk" }]]), false);
    expect(next.order).toEqual([7]);
  });

  it("a row not attempted (no session) holds back the rest of its key and marks nothing", async () => {
    const wire = new Wire();
    let open = true;
    const published = new PublishedClaim(claimOf([row(1, "a"), row(2, "b"), row(3, "a"), row(4, "b")]), "ch", (r) => {
      if (r.id === 2) open = false;
      return open ? wire.start(r) : undefined;
    }, undefined);
    expect(wire.order).toEqual([1]);
    wire.confirmAll();
    const outcome = await published.outcome(new Set());
    expect(outcome.sent.map((r) => r.id)).toEqual([1]);
    expect(outcome.failed).toEqual([]);
    expect([...published.keys()].sort()).toEqual(["a", "b"]);
  });

  it("a publish that throws counts as a failed row, and its key publishes nothing after it; the others go on", async () => {
    const wire = new Wire();
    const published = new PublishedClaim(claimOf([row(1, "a"), row(2, "a"), row(3, "b"), row(4, "a")]), "ch", (r) => {
      if (r.id === 2) throw new Error("encoder broke");
      return wire.start(r);
    }, undefined);
    expect(wire.order).toEqual([1, 3]);
    expect(published.lastPublished.get("a")?.id).toBe(1);
    wire.confirmAll();
    const outcome = await published.outcome(new Set());
    expect(outcome.sent.map((r) => r.id)).toEqual([1, 3]);
    expect(outcome.failed.map((f) => [f.row.id, f.error])).toEqual([[2, "encoder broke"]]);
    expect([...outcome.broken]).toEqual(["a"]);
  });

  it("continues a key the relay still holds right after its held rows", () => {
    const heads = [{ orderingKey: "a", id: 10 }, { orderingKey: "b", id: 20 }];
    expect(keyStarts(heads, new Map([["a", 14]]))).toEqual([{ orderingKey: "a", id: 15 }, { orderingKey: "b", id: 20 }]);
    expect(keyStarts(heads, undefined)).toEqual(heads);
    // A head past what this relay holds (its rows were marked meanwhile): read from the head.
    expect(keyStarts(heads, new Map([["b", 12]]))).toEqual(heads);
  });
});

/** Rows handed over in memory, in a script: claimed before the database's, whether or not the database may be claimed. */
interface HandedOff { handedOff: OutboxRow[] }

/** Steps over scripted claims: records what the pipeline asked and when. */
class Script implements PipelineSteps {
  readonly events: string[] = [];
  readonly holdings: Array<Record<string, number> | undefined> = [];
  readonly wires: Wire[] = [];
  channel = "ch-1";
  constructor(private readonly claims: Array<OutboxRow[] | HandedOff | null>, private readonly failing: ReadonlySet<number> = new Set()) {}
  holdsHandedOff(): boolean {
    const next = this.claims[0];
    return next !== undefined && next !== null && "handedOff" in next;
  }
  claim(holding: ReadonlyMap<string, number> | undefined, database: boolean): Promise<OutboxClaim | null> {
    this.holdings.push(holding && Object.fromEntries(holding));
    if (!database && !this.holdsHandedOff()) {
      this.events.push("claim none (memory only)");
      return Promise.resolve(null);
    }
    const next = this.claims.shift() ?? null;
    const rows = next === null ? null : "handedOff" in next ? next.handedOff : next;
    this.events.push(rows ? `claim ${rows.map((r) => r.id).join(",")}` : "claim none");
    if (!rows) return Promise.resolve(null);
    return Promise.resolve(next !== null && "handedOff" in next ? { ...claimOf(rows), handedOff: true } : claimOf(rows));
  }
  publish(claim: OutboxClaim, out: ClaimsOut | undefined): PublishedClaim {
    const wire = new Wire();
    this.wires.push(wire);
    const same = out === undefined || out.channel === this.channel;
    const published = new PublishedClaim(claim, this.channel, (r) => (same ? wire.start(r) : undefined), out?.lastPublished);
    for (const r of claim.rows) if (wire.order.includes(r.id)) {
      if (this.failing.has(r.id)) setTimeout(() => wire.nack(r.id), 5);
      else setTimeout(() => wire.confirm(r.id), 5);
    }
    return published;
  }
  async settle(claim: PublishedClaim, brokenBefore: ReadonlySet<string>): Promise<{ sent: number; broken: ReadonlySet<string> }> {
    const outcome = await claim.outcome(brokenBefore);
    this.events.push(`settle ${claim.claim.rows.map((r) => r.id).join(",")} sent ${outcome.sent.map((r) => r.id).join(",") || "-"}`);
    return { sent: outcome.sent.length, broken: outcome.broken };
  }
}

describe("the claim pipeline", () => {
  it("takes the next claim while one is out, continuing its keys after the rows it holds, and settles in order", async () => {
    const script = new Script([[row(1, "a"), row(2, "b")], [row(3, "a"), row(4, "b")], null]);
    const pipeline = new ClaimPipeline(script, true);
    expect(await pipeline.step()).toBe(0);
    expect(pipeline.busy).toBe(true);
    await pipeline.step();
    await pipeline.step();
    expect(pipeline.busy).toBe(false);
    expect(script.holdings).toEqual([undefined, { a: 1, b: 2 }, { a: 3, b: 4 }]);
    expect(script.events).toEqual(["claim 1,2", "claim 3,4", "settle 1,2 sent 1,2", "claim none", "settle 3,4 sent 3,4"]);
  });

  it("one claim at a time where the store cannot overlap them", async () => {
    const script = new Script([[row(1, "a")], [row(2, "a")], null]);
    const pipeline = new ClaimPipeline(script, false);
    await pipeline.step();
    await pipeline.step();
    await pipeline.step();
    expect(script.holdings).toEqual([undefined, undefined, undefined]);
    expect(script.events).toEqual(["claim 1", "settle 1 sent 1", "claim 2", "settle 2 sent 2", "claim none"]);
  });

  it("keeps up to four claims of handed-over rows out, and at most two of the database's, where claims overlap", async () => {
    const memory = (id: number): HandedOff => ({ handedOff: [row(id, "a")] });
    const script = new Script([memory(1), [row(2, "b")], [row(3, "c")], [row(4, "d")], memory(5), memory(6), memory(7), null]);
    const pipeline = new ClaimPipeline(script, true);
    // Three claims out, two of the database: the next database claim waits for the first claim.
    await pipeline.step();
    await pipeline.step();
    await pipeline.step();
    expect(script.events).toEqual(["claim 1", "claim 2", "claim 3"]);
    await pipeline.step();
    expect(script.events).toEqual(["claim 1", "claim 2", "claim 3", "settle 1 sent 1", "settle 2 sent 2", "claim 4"]);
    // Handed-over rows go out beside two database claims, up to four claims in all.
    await pipeline.step();
    await pipeline.step();
    expect(script.events.slice(6)).toEqual(["claim 5", "claim 6"]);
    await pipeline.step();
    expect(script.events.slice(8)).toEqual(["settle 3 sent 3", "claim 7"]);
    await pipeline.settleAll();
  });

  it("where claims cannot overlap, takes handed-over rows beside a claim out, but a database claim only when nothing is out", async () => {
    const memory = (id: number): HandedOff => ({ handedOff: [row(id, "a")] });
    const script = new Script([[row(1, "a")], memory(2), memory(3), [row(4, "b")], null]);
    const pipeline = new ClaimPipeline(script, false);
    await pipeline.step();
    await pipeline.step();
    await pipeline.step();
    expect(script.events).toEqual(["claim 1", "claim 2", "claim 3"]);
    // Nothing in memory: the database claim waits until every claim out is settled.
    await pipeline.step();
    expect(script.events.slice(3)).toEqual(["settle 1 sent 1", "settle 2 sent 2", "settle 3 sent 3", "claim 4"]);
    await pipeline.step();
    expect(script.events.slice(7)).toEqual(["settle 4 sent 4", "claim none"]);
    expect(pipeline.busy).toBe(false);
  });

  it("a nack in a claim while the next is out: the next claim's rows of that key are not marked, and everything out is settled before claiming again", async () => {
    const script = new Script([[row(1, "a"), row(2, "a"), row(3, "b")], [row(4, "a"), row(5, "b")], [row(2, "a")]], new Set([2]));
    const pipeline = new ClaimPipeline(script, true);
    await pipeline.step();
    await pipeline.step();
    // This step waits for the first claim, sees the failure, and settles the one out instead of claiming.
    const sent = await pipeline.step();
    expect(script.events).toEqual(["claim 1,2,3", "claim 4,5", "settle 1,2,3 sent 1,3", "settle 4,5 sent 5"]);
    expect(sent).toBe(3);
    expect(pipeline.busy).toBe(false);
    // The failure is forgotten once nothing is out: the next claim starts afresh, holding nothing.
    await pipeline.step();
    expect(script.holdings).toEqual([undefined, { a: 2, b: 3 }, undefined]);
    await pipeline.settleAll();
  });

  it("a claim taken after the channel changed publishes nothing: its rows wait, untouched, behind the claim out", async () => {
    const script = new Script([[row(1, "a"), row(2, null)], [row(3, "a"), row(4, null)], null]);
    const pipeline = new ClaimPipeline(script, true);
    await pipeline.step();
    script.channel = "ch-2";
    await pipeline.step();
    expect(script.wires[1]!.order).toEqual([]);
    await pipeline.step();
    expect(script.events).toEqual(["claim 1,2", "claim 3,4", "settle 1,2 sent 1,2", "claim none", "settle 3,4 sent -"]);
  });

  it("a failed claim keeps its error for the step after, once every claim out is settled", async () => {
    const script = new Script([[row(1, "a")], [row(2, "a")]]);
    const settle = script.settle.bind(script);
    script.settle = async (claim, brokenBefore) => {
      if (claim.claim.rows[0]!.id === 1) { await claim.outcome(brokenBefore); throw new Error("hook threw"); }
      return settle(claim, brokenBefore);
    };
    const pipeline = new ClaimPipeline(script, true);
    await pipeline.step();
    await pipeline.step();
    await expect(pipeline.step()).rejects.toThrow("hook threw");
    expect(pipeline.busy).toBe(false);
    // The second claim (key a, after the failed one) was settled without marking its row.
    expect(script.events).toEqual(["claim 1", "claim 2", "settle 2 sent -"]);
  });
});
