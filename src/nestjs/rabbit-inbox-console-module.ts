import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import {
  All, type CanActivate, Controller, type DynamicModule, type FactoryProvider, Inject, Module, type ModuleMetadata, type OnApplicationShutdown, type Provider, Req, Res, UseGuards,
} from "@nestjs/common";
import { ApplicationConfig } from "@nestjs/core";
import { type ConsoleHandler, createConsoleHandler } from "../console/console-handler.js";
import type { ConsoleOptions } from "../console/console-context.js";

/** What the console gets besides where it is mounted and who may reach it: its store, broker, replay window... */
export type RabbitInboxConsoleSettings = Omit<ConsoleOptions, "basePath" | "authenticatedCaller" | "token">;

/** Where the console is mounted, and the guard in front of it. */
export interface RabbitInboxConsoleMount {
  /** The route prefix, e.g. `ops/console` (after the application's global prefix, if any). */
  path: string;
  /**
   * The application's guards: only the requests they let through reach the console, which then
   * has no login of its own. At least one (a global guard alone cannot be seen from here: name
   * it again).
   */
  guards: Array<CanActivate | (abstract new (...args: never[]) => CanActivate)>;
  /**
   * Who made a request the guards let through, for the audit, from the framework's request
   * (Express's `req`, or Fastify's request): e.g. `(req) => req.user?.email`. Default: `console`.
   */
  actor?: (request: never) => string | undefined;
}

export interface RabbitInboxConsoleAsyncOptions extends RabbitInboxConsoleMount, Pick<ModuleMetadata, "imports"> {
  useFactory: (...args: never[]) => RabbitInboxConsoleSettings | Promise<RabbitInboxConsoleSettings>;
  /** What `useFactory` gets, in order. */
  inject?: FactoryProvider["inject"];
}

const CONSOLE_SETTINGS = Symbol.for("rabbit-inbox:console-settings");

/** The console's request handler for the controller, and its close() at application shutdown. */
class ConsoleHost implements OnApplicationShutdown {
  /** The actor of each request the guards let through, read by the console's authenticatedCaller. */
  readonly actors = new WeakMap<IncomingMessage, string | undefined>();
  readonly handler: ConsoleHandler;

  constructor(settings: RabbitInboxConsoleSettings, basePath: string) {
    this.handler = createConsoleHandler({ ...settings, basePath, authenticatedCaller: (req) => this.actors.get(req) });
  }

  onApplicationShutdown(): Promise<void> {
    return this.handler.close();
  }
}

/**
 * The operator console (`createConsoleHandler`) in a Nest application, on Express or Fastify,
 * behind the application's own guards: a controller on `<path>` and everything under it. The
 * console reads request bodies itself; Nest's body parsers read them first, so create the
 * application with `{ rawBody: true }` and the console gets the raw bytes back.
 */
export class RabbitInboxConsoleModule {
  static register(options: RabbitInboxConsoleMount & RabbitInboxConsoleSettings): DynamicModule {
    const { path, guards, actor, ...settings } = options;
    return consoleModule({ path, guards, ...(actor ? { actor } : {}) }, { provide: CONSOLE_SETTINGS, useValue: settings }, []);
  }

  static registerAsync(options: RabbitInboxConsoleAsyncOptions): DynamicModule {
    const { path, guards, actor, useFactory, inject = [], imports = [] } = options;
    return consoleModule({ path, guards, ...(actor ? { actor } : {}) }, { provide: CONSOLE_SETTINGS, useFactory, inject }, imports);
  }
}
Module({})(RabbitInboxConsoleModule);

function consoleModule(mount: RabbitInboxConsoleMount, settings: Provider, imports: NonNullable<ModuleMetadata["imports"]>): DynamicModule {
  if (mount.guards.length === 0) throw new TypeError("RabbitInboxConsoleModule needs at least one guard: the console has no login of its own when mounted in an application");
  const route = `/${mount.path.replace(/^\/+|\/+$/g, "")}`;
  const host: Provider = {
    provide: ConsoleHost,
    useFactory: (given: RabbitInboxConsoleSettings, config: ApplicationConfig) => {
      const prefix = config.getGlobalPrefix().replace(/^\/+|\/+$/g, "");
      return new ConsoleHost(given, `${prefix ? `/${prefix}` : ""}${route}`);
    },
    inject: [CONSOLE_SETTINGS, ApplicationConfig],
  };
  return { module: RabbitInboxConsoleModule, imports, providers: [settings, host], controllers: [consoleController(route, mount)] };
}

/** The raw request and response under Express's or Fastify's (whose reply must let go of the response first). */
function rawExchange(request: unknown, response: unknown): { req: IncomingMessage; res: ServerResponse; rawBody: unknown } {
  const reply = response as { raw?: ServerResponse; hijack?: () => void };
  const rawBody = (request as { rawBody?: unknown }).rawBody;
  if (typeof reply.hijack === "function" && reply.raw) {
    reply.hijack();
    return { req: (request as { raw: IncomingMessage }).raw, res: reply.raw, rawBody };
  }
  return { req: request as IncomingMessage, res: response as ServerResponse, rawBody };
}

/**
 * The request as the console reads it: when a body parser in front already consumed the body,
 * a copy that streams the raw bytes Nest kept (`rawBody: true`) with the same method, URL,
 * headers and socket; undefined when the body is gone and no copy was kept.
 */
function readable(req: IncomingMessage, rawBody: unknown): IncomingMessage | undefined {
  const hadBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
  if (!req.readableEnded || !hadBody) return req;
  if (!Buffer.isBuffer(rawBody)) return undefined;
  const copy = Readable.from([rawBody]);
  return Object.assign(copy, { headers: req.headers, rawHeaders: req.rawHeaders, method: req.method, url: req.url, httpVersion: req.httpVersion, socket: req.socket }) as unknown as IncomingMessage;
}

function consoleController(route: string, mount: RabbitInboxConsoleMount): new (host: ConsoleHost) => unknown {
  class RabbitInboxConsoleController {
    constructor(private readonly host: ConsoleHost) {}

    serve(request: unknown, response: unknown): void {
      const { req, res, rawBody } = rawExchange(request, response);
      const forwarded = readable(req, rawBody);
      if (!forwarded) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: "the request body was read before the console got it: create the Nest application with { rawBody: true } (NestFactory.create(AppModule, { rawBody: true }))" }));
        return;
      }
      this.host.actors.set(forwarded, mount.actor?.(request as never));
      this.host.handler(forwarded, res);
    }
  }
  // Decorators applied as calls: this package is compiled without decorator syntax.
  const prototype = RabbitInboxConsoleController.prototype;
  Controller(route)(RabbitInboxConsoleController);
  UseGuards(...mount.guards)(RabbitInboxConsoleController);
  Inject(ConsoleHost)(RabbitInboxConsoleController, undefined, 0);
  Req()(prototype, "serve", 0);
  Res()(prototype, "serve", 1);
  All(["", "*"])(prototype, "serve", Object.getOwnPropertyDescriptor(prototype, "serve")!);
  return RabbitInboxConsoleController;
}
