/**
 * Reads back an array parameter sent in PostgreSQL's binary array format (what the store's pooled
 * clients send, see src/store/postgres/array-parameters.ts): the elements as strings (text and
 * jsonb, jsonb without its version byte), Buffers (bytea) or numbers (int8). Written apart from
 * the encoder, from the format's description, so that a test reading what was sent does not
 * share the encoder's mistakes.
 */
const TEXT = 25;
const BYTEA = 17;
const JSONB = 3802;
const INT8 = 20;

export type ArrayElement = string | Buffer | number | null;

export function decodeBinaryArray(buffer: Buffer): ArrayElement[] {
  const ndim = buffer.readInt32BE(0);
  const oid = buffer.readInt32BE(8);
  if (ndim === 0) return [];
  if (ndim !== 1) throw new Error(`expected one dimension, got ${ndim}`);
  const length = buffer.readInt32BE(12);
  if (buffer.readInt32BE(16) !== 1) throw new Error("expected a lower bound of 1");
  const out: ArrayElement[] = [];
  let at = 20;
  for (let i = 0; i < length; i++) {
    const size = buffer.readInt32BE(at);
    at += 4;
    if (size === -1) {
      out.push(null);
      continue;
    }
    const bytes = buffer.subarray(at, at + size);
    at += size;
    if (oid === TEXT) out.push(bytes.toString("utf8"));
    else if (oid === JSONB) out.push(bytes.subarray(1).toString("utf8"));
    else if (oid === BYTEA) out.push(Buffer.from(bytes));
    else if (oid === INT8) out.push(Number(bytes.readBigInt64BE(0)));
    else throw new Error(`unknown element type ${oid}`);
  }
  if (at !== buffer.length) throw new Error(`${buffer.length - at} bytes after the last element`);
  return out;
}

/** True when the Buffer starts as a binary array of one of the element types above does (a bytea value does not, by chance, often). */
export function looksLikeBinaryArray(buffer: Buffer): boolean {
  if (buffer.length < 12) return false;
  const ndim = buffer.readInt32BE(0);
  const flags = buffer.readInt32BE(4);
  return (ndim === 0 || ndim === 1) && (flags === 0 || flags === 1) && [TEXT, BYTEA, JSONB, INT8].includes(buffer.readInt32BE(8));
}

/** A parameter as the test reads it: a binary array decoded, a plain array or any other value as it is. */
export function parameterElements(value: unknown): unknown[] {
  if (Buffer.isBuffer(value) && looksLikeBinaryArray(value)) return decodeBinaryArray(value);
  return Array.isArray(value) ? value : [value];
}
