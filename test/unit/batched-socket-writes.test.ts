import type { ChannelModel } from "amqplib";
import { describe, expect, it } from "vitest";
import { batchSocketWrites } from "../../src/amqp/batched-socket-writes.js";

/** amqplib's connection internals as batchSocketWrites finds them: a socket stream and a multiplexer. */
function fakeModel(frames: string[][]) {
  const events: string[] = [];
  const stream = {
    corked: 0,
    cork() { this.corked++; events.push("cork"); },
    uncork() { this.corked--; events.push("uncork"); },
    write(chunk: string) { events.push(this.corked > 0 ? `buffered ${chunk}` : `sent ${chunk}`); return true; },
  };
  const muxer = {
    _readIncoming(this: unknown) {
      if (this !== muxer) throw new Error("called on another object");
      for (const frame of frames.shift() ?? []) stream.write(frame);
    },
  };
  return { model: { connection: { stream, muxer } } as unknown as ChannelModel, muxer, events };
}

describe("batchSocketWrites", () => {
  it("corks the socket around each pass of the multiplexer: a pass's frames leave together, in order", () => {
    const { model, muxer, events } = fakeModel([["a", "b", "c"], ["d"]]);
    batchSocketWrites(model);
    muxer._readIncoming();
    muxer._readIncoming();
    expect(events).toEqual(["cork", "buffered a", "buffered b", "buffered c", "uncork", "cork", "buffered d", "uncork"]);
  });

  it("uncorks even when a pass throws", () => {
    const { model, muxer, events } = fakeModel([]);
    muxer._readIncoming = () => { throw new Error("boom"); };
    batchSocketWrites(model);
    expect(() => muxer._readIncoming()).toThrow("boom");
    expect(events).toEqual(["cork", "uncork"]);
  });

  it("leaves a connection whose internals are not as expected as it is", () => {
    const bare = { connection: { stream: {} } } as unknown as ChannelModel;
    expect(() => batchSocketWrites(bare)).not.toThrow();
    const { model, muxer, events } = fakeModel([["a"]]);
    (model as unknown as { connection: { stream: { cork?: unknown } } }).connection.stream.cork = undefined;
    const before = Object.getOwnPropertyDescriptor(muxer, "_readIncoming");
    batchSocketWrites(model);
    expect(Object.getOwnPropertyDescriptor(muxer, "_readIncoming")).toEqual(before);
    muxer._readIncoming();
    expect(events).toEqual(["sent a"]);
  });
});
