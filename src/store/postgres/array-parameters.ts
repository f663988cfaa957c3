/**
 * How a statement's array parameters travel. A batch statement takes its rows as arrays
 * (`unnest($1::text[], ...)`), one element per event or message.
 *
 * As text, node-postgres writes an array literal: every element quoted and escaped by a regular
 * expression, a body as a doubled-backslash hex string, and PostgreSQL parses it all back. For
 * a batch of outbox rows that is several kilobytes of short-lived strings per row, on both sides.
 *
 * In binary, an array is one Buffer in PostgreSQL's own array format (array_recv): node-postgres
 * sends a Buffer parameter as binary as it is, and PostgreSQL reads each element by its length,
 * with no quoting, escaping or parsing. The element type must be the one the statement casts the
 * parameter to (`$1::text[]` takes text elements): PostgreSQL refuses any other.
 *
 * Binary needs node-postgres's own protocol writer: the store's pooled pg clients use it; a data
 * layer's connection (Knex, Drizzle, Prisma...) takes plain arrays, which it encodes itself.
 */
export interface ArrayParameters {
  text(values: ReadonlyArray<string | null>): unknown;
  bytea(values: ReadonlyArray<Uint8Array>): unknown;
  /** Each element a JSON text. */
  jsonb(values: ReadonlyArray<string>): unknown;
  /** Safe integers. */
  int8(values: ReadonlyArray<number>): unknown;
}

/** Plain JavaScript arrays, for the data layer to encode. */
export const plainArrays: ArrayParameters = {
  text: (values) => values,
  bytea: (values) => values,
  jsonb: (values) => values,
  int8: (values) => values,
};

/** Element type OIDs (pg_type), as array_recv checks them. */
const OID = { text: 25, bytea: 17, jsonb: 3802, int8: 20 } as const;
/** ndim, flags (has nulls), element type, then the one dimension's length and lower bound. */
const HEADER_BYTES = 20;
const NULL_LENGTH = -1;
/** jsonb's binary form: a version byte, then the JSON text. */
const JSONB_VERSION = 1;
const TWO_TO_32 = 4294967296;

/** One Buffer per array, in PostgreSQL's binary array format. */
export const binaryArrays: ArrayParameters = {
  text: (values) => stringArray(OID.text, values, false),
  jsonb: (values) => stringArray(OID.jsonb, values, true),
  bytea(values) {
    let size = HEADER_BYTES;
    for (const v of values) size += 4 + v.length;
    const out = Buffer.allocUnsafe(size);
    let at = writeHeader(out, OID.bytea, values.length, false);
    for (const v of values) {
      at = out.writeInt32BE(v.length, at);
      out.set(v, at);
      at += v.length;
    }
    return out.subarray(0, at);
  },
  int8(values) {
    const out = Buffer.allocUnsafe(HEADER_BYTES + 12 * values.length);
    let at = writeHeader(out, OID.int8, values.length, false);
    for (const v of values) {
      if (!Number.isSafeInteger(v)) throw new TypeError(`an int8 array element must be a safe integer, got ${String(v)}`);
      at = out.writeInt32BE(8, at);
      // High and low 32 bits of the two's complement; >>> 0 takes the low word of negative values too.
      at = out.writeInt32BE(Math.floor(v / TWO_TO_32), at);
      at = out.writeUInt32BE(v >>> 0, at);
    }
    return out.subarray(0, at);
  },
};

function stringArray(oid: number, values: ReadonlyArray<string | null>, jsonb: boolean): Buffer {
  const prefix = jsonb ? 1 : 0;
  let size = HEADER_BYTES;
  let nulls = false;
  for (const v of values) {
    size += 4;
    if (v === null) nulls = true;
    else size += prefix + Buffer.byteLength(v, "utf8");
  }
  const out = Buffer.allocUnsafe(size);
  let at = writeHeader(out, oid, values.length, nulls);
  for (const v of values) {
    if (v === null) {
      at = out.writeInt32BE(NULL_LENGTH, at);
      continue;
    }
    // The length is known only once written: leave its room, then fill it in.
    const lengthAt = at;
    at += 4;
    if (jsonb) at = out.writeUInt8(JSONB_VERSION, at);
    at += out.write(v, at, "utf8");
    out.writeInt32BE(at - lengthAt - 4, lengthAt);
  }
  return out.subarray(0, at);
}

function writeHeader(out: Buffer, oid: number, length: number, nulls: boolean): number {
  // An empty array has no dimension at all.
  let at = out.writeInt32BE(length === 0 ? 0 : 1, 0);
  at = out.writeInt32BE(nulls ? 1 : 0, at);
  at = out.writeInt32BE(oid, at);
  if (length === 0) return at;
  at = out.writeInt32BE(length, at);
  return out.writeInt32BE(1, at);
}
