import type { IncomingMessage } from "node:http";
import type { BrokerUrls } from "../amqp/broker-connection.js";
import { type ThrottledLogger, throttleRepeats } from "../core/log-throttle.js";
import type { Logger } from "../core/logger.js";
import { POSITIVE_DURATION, checkNumbers } from "../core/option-checks.js";
import { AmqpReplayPublisher } from "../quarantine/amqp-replay-publisher.js";
import type { ConfirmedPublish } from "../quarantine/replay.js";
import { type InboxOperations, type OperationsCapable, hasOperations } from "../core/store-contract/capabilities.js";
import { openStore } from "../store/open-store.js";
import { ConsoleRequestError } from "./console-request-error.js";
import { AuthThrottle } from "./auth-throttle.js";
import { BulkJobs } from "./bulk-jobs.js";
import { ConsoleSessions } from "./console-sessions.js";

export interface ConsoleOptions {
  /** A store with operations (PostgresStore, MysqlStore, SqliteStore): the console uses it and does not close it. */
  store?: OperationsCapable;
  /** Or a database URL (like DATABASE_URL): the console opens its own store and closes it in `close()`. */
  databaseUrl?: string;
  /**
   * Required for anything but a loopback-only console: every API call then needs
   * `Authorization: Bearer <token>` or the session cookie the login page gives.
   */
  token?: string;
  /** How replays are published: a confirmed publish of your own, or the broker URL(s) to open one on the first replay. */
  publish?: ConfirmedPublish;
  amqpUrl?: BrokerUrls;
  confirmTimeoutMs?: number;
  /** Where the console is mounted, e.g. `/ops/console` (links and the cookie's path use it). Default: the root. */
  basePath?: string;
  /** The replay window cleanup runs with (e.g. 14d), to show the retention horizon it implies. */
  replayWindowMs?: number;
  /**
   * For a console behind the application's own authentication (a Nest guard, an Express auth
   * middleware), which lets through only the requests it authenticated: returns who made `req`,
   * for the audit (e.g. the signed-in user's e-mail). The console then answers under any host
   * name with no token and no login of its own; its same-origin and CSRF checks stay, as the
   * application's cookie rides along on a forged cross-site request too. Not together with
   * `token`.
   */
  authenticatedCaller?: (req: IncomingMessage) => string | undefined;
  /** Session lifetime. Default 8 hours. */
  sessionTtlMs?: number;
  /**
   * Where a request that failed on the console's side (500) is logged, passwords masked, and
   * failed authentications (warn, with the client's address, never the token). Default: nowhere.
   */
  logger?: Logger;
}

/** What every route needs: the database, the publisher, the sessions. */
export class ConsoleContext {
  readonly sessions: ConsoleSessions;
  readonly basePath: string;
  readonly jobs = new BulkJobs();
  /** Failed authentications per client: past 10 a minute, the client waits (429). */
  readonly throttle = new AuthThrottle();
  /** Where failed authentications are logged: one line per client's burst, not one per guess. */
  readonly authLog: ThrottledLogger | undefined;
  private opened: Promise<{ operations: InboxOperations; close?: () => Promise<void> }> | undefined;
  private publisher: Promise<AmqpReplayPublisher> | undefined;

  constructor(readonly options: ConsoleOptions) {
    if (!options.store && !options.databaseUrl) throw new TypeError("createConsoleHandler needs a store or a databaseUrl");
    if (options.token && options.authenticatedCaller) {
      throw new TypeError("createConsoleHandler takes a token or an authenticatedCaller, not both: the application in front authenticates, or the console does");
    }
    checkNumbers("", options, { confirmTimeoutMs: POSITIVE_DURATION, replayWindowMs: { min: 0 }, sessionTtlMs: POSITIVE_DURATION });
    this.sessions = new ConsoleSessions(options.token, options.sessionTtlMs);
    this.basePath = (options.basePath ?? "").replace(/\/+$/, "");
    this.authLog = options.logger ? throttleRepeats(options.logger, { intervalMs: 10_000 }) : undefined;
  }

  operations(): Promise<InboxOperations> {
    if (!this.opened) {
      this.opened = this.open();
      // A database that could not be opened is tried again on the next request.
      this.opened.catch(() => { this.opened = undefined; });
    }
    return this.opened.then((o) => o.operations);
  }

  /** The confirmed publish replays go through; a 503 when the console was given no broker. */
  async publish(): Promise<ConfirmedPublish> {
    if (this.options.publish) return this.options.publish;
    if (this.options.amqpUrl === undefined) throw new ConsoleRequestError("RI_CONSOLE_NO_BROKER", "this console has no broker to replay to (give it amqpUrl or publish)");
    this.publisher ??= AmqpReplayPublisher.connect(this.options.amqpUrl, {
      connectionName: `rabbit-inbox console ${process.pid}`, ...(this.options.confirmTimeoutMs ? { confirmTimeoutMs: this.options.confirmTimeoutMs } : {}),
    });
    this.publisher.catch(() => { this.publisher = undefined; });
    return (await this.publisher).publish;
  }

  /** A link inside the console. */
  href(path: string): string {
    return `${this.basePath}${path}`;
  }

  async close(): Promise<void> {
    this.authLog?.flush();
    await this.jobs.cancelAll();
    const opened = this.opened;
    const publisher = this.publisher;
    this.opened = undefined;
    this.publisher = undefined;
    await Promise.allSettled([opened?.then((o) => o.close?.()), publisher?.then((p) => p.close())]);
  }

  private async open(): Promise<{ operations: InboxOperations; close?: () => Promise<void> }> {
    if (this.options.store) {
      if (!hasOperations(this.options.store)) throw new TypeError("the console's store has no operations()");
      return { operations: this.options.store.operations() };
    }
    const store = await openStore(this.options.databaseUrl!, { poolSize: 4, source: "the console's database URL" });
    return { operations: store.operations(), close: () => store.close() };
  }
}
