import type { ChannelModel } from "amqplib";

/** The parts of amqplib's connection internals this relies on; checked at run time. */
interface MuxedConnection {
  connection?: {
    stream?: { cork?: () => void; uncork?: () => void };
    muxer?: { _readIncoming?: () => void };
  };
}

/**
 * Makes an amqplib connection write the frames its channels queued in one turn with one
 * system call instead of one per frame. amqplib's multiplexer moves each frame to the socket
 * with its own `write()`, and an uncorked socket sends each at once: a relay publishing a
 * thousand messages made a thousand `write` calls, a large share of its CPU. Corking the
 * socket around each pass of the multiplexer keeps the bytes and their order exactly as they
 * were and only gathers them into one `writev`. Where amqplib's internals are not as expected
 * (another version), the connection is left as it is.
 */
export function batchSocketWrites(model: ChannelModel): void {
  const connection = (model as unknown as MuxedConnection).connection;
  const stream = connection?.stream;
  const muxer = connection?.muxer;
  const readIncoming = muxer?._readIncoming;
  if (!stream || typeof stream.cork !== "function" || typeof stream.uncork !== "function" || typeof readIncoming !== "function") return;
  const cork = stream.cork.bind(stream);
  const uncork = stream.uncork.bind(stream);
  muxer!._readIncoming = function batchedReadIncoming(this: unknown) {
    cork();
    try {
      readIncoming.call(this);
    } finally {
      uncork();
    }
  };
}
