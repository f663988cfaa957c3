import { InboxConfigError } from "../../core/errors.js";
import { classifyMysqlError, isMysqlConnectionLoss, isMysqlContention } from "./errors.js";

/** SERVER_STATUS_IN_TRANS in the server's OK packet: a transaction is open on the session. */
const SERVER_STATUS_IN_TRANS = 0x0001;

/** A statement as mysql2's promise API runs it: `[rows or OK packet, fields]`. */
type Run = () => Promise<[unknown, unknown]>;

/**
 * What one inbox transaction learned about its session from the statements that ran on it.
 *
 * A deadlock ends the transaction on the server while the session goes on in autocommit mode,
 * and a COMMIT, ROLLBACK or DDL statement in the handler ends it too: the rest of the handler's
 * writes would then autocommit without the dedup row. So once the transaction ended early,
 * every further statement is refused (with the original error, classified: it is retried like
 * the deadlock was), and the store refuses to COMMIT.
 */
export class SessionGuard {
  /** Why the server ended our transaction under the handler's feet; undefined while it is open. */
  private ended: unknown = undefined;

  /** `beforeCall`: runs before each of the handler's statements, and may refuse it by throwing. */
  constructor(private readonly beforeCall?: (method: "query" | "execute", args: unknown[]) => Promise<void>) {}

  /** True once a statement showed that the connection itself is gone. */
  get broken(): boolean {
    return isMysqlConnectionLoss(this.ended);
  }

  /** Throws (classified) when the transaction already ended; COMMIT is refused the same way. */
  checkOpen(): void {
    if (this.ended !== undefined) throw classifyMysqlError(this.ended);
  }

  /** Runs one statement of the transaction, refused once it ended, and notes how it left the session. */
  async run(statement: Run): Promise<[unknown, unknown]> {
    this.checkOpen();
    try {
      const result = await statement();
      this.noteStatus(result[0]);
      return result;
    } catch (error) {
      // A deadlock or a lost session ends the transaction; other errors leave it open.
      if (isMysqlContention(error) || isMysqlConnectionLoss(error)) this.ended ??= error;
      throw error;
    }
  }

  /**
   * The handle handlers receive: the same connection, whose `query` and `execute` go through
   * `run`, so that the handler's own statements are refused and recorded like the store's.
   */
  guard<C extends object>(connection: C): C {
    return new Proxy(connection, {
      get: (target, property, receiver) => {
        const value: unknown = Reflect.get(target, property, receiver);
        if ((property !== "query" && property !== "execute") || typeof value !== "function") return value;
        const method = value as (...args: unknown[]) => Promise<[unknown, unknown]>;
        const before = this.beforeCall;
        if (!before) return (...args: unknown[]) => this.run(() => method.apply(target, args));
        return (...args: unknown[]) => this.run(async () => {
          await before(property, args);
          return method.apply(target, args);
        });
      },
    });
  }

  /** Reads the server's in-transaction flag from a statement's OK packet(s). */
  private noteStatus(result: unknown): void {
    const headers: unknown[] = Array.isArray(result) ? result : [result];
    for (const h of headers) {
      if (isResultHeader(h) && (h.serverStatus & SERVER_STATUS_IN_TRANS) === 0 && this.ended === undefined) {
        this.ended = new InboxConfigError(
          "the inbox transaction ended before the store committed it (a COMMIT, ROLLBACK or DDL statement in the handler?): " +
            "the handler's later writes were not part of it",
        );
      }
    }
  }
}

/** An OK packet as mysql2 returns it, never a row that happens to have a `serverStatus` column. */
function isResultHeader(value: unknown): value is { serverStatus: number } {
  return typeof value === "object" && value !== null && value.constructor?.name === "ResultSetHeader"
    && typeof (value as { serverStatus?: unknown }).serverStatus === "number";
}
