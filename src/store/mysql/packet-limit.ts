import { PermanentEventError } from "../../core/errors.js";

/** What reading the limit needs of a connection (a MysqlConnection fits): one query. */
interface LimitReader {
  query(sql: string): Promise<[unknown, unknown]>;
}

/**
 * Statements smaller than this are sent without being weighed: far below any server's
 * `max_allowed_packet` in practice (16 MiB by default on MariaDB, 64 MiB on MySQL 8). A server
 * set lower still answers 1153, which is classified the same way.
 */
const WEIGHED_FROM = 64 * 1024;

/**
 * A statement over the server's `max_allowed_packet` is refused before it is sent. Sent, the
 * server answers 1153 and closes the session, or closes it while the client is still writing:
 * mysql2 then reports `write ECONNRESET`, which cannot be told from a network failure, and the
 * event would be retried as if the database were down (seen here on MariaDB 10.11). Refused
 * here, it is the event's permanent failure at once, and the connection stays sound.
 *
 * The limit is read from the server once per store, with the first statement large enough to
 * need it: a change of the server's setting is seen after a restart.
 */
export class PacketLimit {
  private limit: Promise<number> | undefined;

  /** Throws PermanentEventError `too_large` when the statement would not fit; `text`: sent with the values inlined (mysql2's `query`). */
  async check(connection: LimitReader, sql: string, values: unknown, text: boolean): Promise<void> {
    const list = Array.isArray(values) ? (values as unknown[]) : [];
    if (bytesAtMost(sql, list, text) < WEIGHED_FROM) return;
    const size = bytesOf(sql, list, text);
    if (size < WEIGHED_FROM) return;
    this.limit ??= readLimit(connection);
    const limit = await this.limit.catch((error: unknown) => {
      this.limit = undefined;
      throw error;
    });
    if (size > limit) {
      throw new PermanentEventError("too_large", `MySQL: a statement of about ${size} bytes is over the server's max_allowed_packet (${limit} bytes); it was not sent`);
    }
  }

  /** Checks what a handler's `query` or `execute` call would send: `(sql, values)` or `({ sql, values })`. */
  checkCall(connection: LimitReader, method: "query" | "execute", args: readonly unknown[]): Promise<void> {
    const [first, second] = args;
    if (typeof first === "string") return this.check(connection, first, second, method === "query");
    if (typeof first === "object" && first !== null && typeof (first as { sql?: unknown }).sql === "string") {
      const options = first as { sql: string; values?: unknown };
      return this.check(connection, options.sql, options.values ?? second, method === "query");
    }
    return Promise.resolve();
  }
}

async function readLimit(connection: LimitReader): Promise<number> {
  const [rows] = await connection.query("SELECT @@max_allowed_packet AS packet");
  return Number((rows as Array<{ packet: unknown }>)[0]!.packet);
}

/** A bound without reading strings' bytes (at most 3 bytes a UTF-16 unit), so small statements cost a loop of lengths. */
function bytesAtMost(sql: string, values: readonly unknown[], text: boolean): number {
  let bytes = 3 * sql.length;
  for (const v of values) bytes += typeof v === "string" ? 3 * v.length + 9 : valueBytes(v, text);
  return bytes;
}

/**
 * What the statement's packet carries, near enough: the SQL and each value, as the binary
 * protocol sends it (`execute`) or inlined into the SQL text (`query`: a Buffer as X'hex').
 */
function bytesOf(sql: string, values: readonly unknown[], text: boolean): number {
  let bytes = 16 + Buffer.byteLength(sql);
  for (const v of values) bytes += valueBytes(v, text);
  return bytes;
}

function valueBytes(value: unknown, text: boolean): number {
  if (typeof value === "string") return Buffer.byteLength(value) + (text ? 2 : 9);
  if (value instanceof Uint8Array) return text ? 2 * value.length + 3 : value.length + 9;
  return 32;
}
