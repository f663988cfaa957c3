import type { IncomingMessage } from "node:http";
import type { ConsoleContext } from "./console-context.js";
import { ConsoleRequestError } from "./console-request-error.js";
import type { Caller, ConsoleSession } from "./console-sessions.js";
import type { Html } from "./html.js";
import { NOTHING, type Schema } from "./request-schema.js";

/** Reads are GET (HEAD answers as GET without the body), every change is a POST. */
export type Method = "GET" | "POST";

/** What a route answers; an error is thrown instead (its code decides the status). */
export type Reply =
  | { json: unknown; status?: number; headers?: Record<string, string> }
  | { page: Html; status?: number; headers?: Record<string, string> }
  | { redirect: string; headers?: Record<string, string> }
  | { asset: string; type: string };

/** A request as a route's handler sees it: only what its schemas read, checked. */
export interface Call<P, Q, B> {
  ctx: ConsoleContext;
  req: IncomingMessage;
  params: P;
  query: Q;
  body: B;
}

/** The request of an authenticated caller (every route but the console's files and the login). */
export interface CallerCall<P, Q, B> extends Call<P, Q, B> {
  caller: Caller;
  /** The caller's browser session (a page's forms carry its CSRF token); null for a bearer token. */
  session: ConsoleSession | null;
}

interface Declared<P, Q, B> {
  method: Method;
  /** Literal segments and `:name` parameters: `/api/quarantine/:id/replay`. */
  path: string;
  params: Schema<P>;
  query: Schema<Q>;
  body: Schema<B>;
}

/**
 * Who may reach a route: `public` anyone under any host name (the stylesheet, the icon);
 * `guest` anyone the host check lets through (the login form); `caller` an authenticated caller.
 */
export type Route =
  | (Declared<unknown, unknown, unknown> & { access: "public"; handle(call: Call<unknown, unknown, unknown>): Reply | Promise<Reply> })
  | (Declared<unknown, unknown, unknown> & { access: "guest"; handle(call: Call<unknown, unknown, unknown>): Reply | Promise<Reply> })
  | (Declared<unknown, unknown, unknown> & { access: "caller"; handle(call: CallerCall<unknown, unknown, unknown>): Reply | Promise<Reply> });

type Input<P, Q, B> = { method: Method; path: string; params?: Schema<P>; query?: Schema<Q>; body?: Schema<B> };

const declared = <P, Q, B>(r: Input<P, Q, B>): Declared<P, Q, B> => ({
  method: r.method, path: r.path, params: r.params ?? (NOTHING as Schema<P>), query: r.query ?? (NOTHING as Schema<Q>), body: r.body ?? (NOTHING as Schema<B>),
});

/** A route for an authenticated caller; a part without a schema reads nothing. */
export function route<P, Q, B>(r: Input<P, Q, B> & { handle: (call: CallerCall<P, Q, B>) => Reply | Promise<Reply> }): Route {
  return { ...declared(r), access: "caller", handle: r.handle };
}

export function openRoute<P, Q, B>(access: "public" | "guest", r: Input<P, Q, B> & { handle: (call: Call<P, Q, B>) => Reply | Promise<Reply> }): Route {
  return { ...declared(r), access, handle: r.handle };
}

/** The `:name` parameters of a path pattern. */
export function paramsOf(pattern: string): string[] {
  return pattern.split("/").filter((s) => s.startsWith(":")).map((s) => s.slice(1));
}

/** The route and its path's parameters; or none, and the refusal to answer once the caller is known. */
export type Match = { route: Route; params: Record<string, string>; miss?: undefined } | { route: null; params: Record<string, string>; miss: ConsoleRequestError };

/**
 * The route for a method and a path. A path no route has is a 404; a path some route has, asked
 * with another method, a 405 naming the methods it takes. A literal segment wins over a
 * parameter in the same place (`/jobs/new` before `/jobs/:id`).
 */
export function findRoute(routes: readonly Route[], method: string, path: string): Match {
  const segments = path.split("/");
  const matches = routes.flatMap((r) => {
    const params = matchPath(r.path, segments);
    return params ? [{ route: r, params }] : [];
  });
  if (matches.length === 0) return { route: null, params: {}, miss: new ConsoleRequestError("RI_CONSOLE_NOT_FOUND", `no ${isApiPath(path) ? "route" : "page"} ${path}`) };
  const asked = method === "HEAD" ? "GET" : method;
  const found = matches.filter((m) => m.route.method === asked).sort((a, b) => literals(b.route.path) - literals(a.route.path))[0];
  if (found) return found;
  const methods = new Set(matches.map((m) => m.route.method));
  const allow = [...(methods.has("GET") ? ["GET", "HEAD"] : []), ...(methods.has("POST") ? ["POST"] : [])].join(", ");
  return { route: null, params: {}, miss: new ConsoleRequestError("RI_CONSOLE_METHOD_NOT_ALLOWED", `${method} is not allowed on ${path}: it takes ${allow}`, { headers: { allow } }) };
}

/** The JSON API lives under /api; everything else is a page. */
export function isApiPath(path: string): boolean {
  return path === "/api" || path.startsWith("/api/");
}

function matchPath(pattern: string, segments: readonly string[]): Record<string, string> | null {
  const parts = pattern.split("/");
  if (parts.length !== segments.length) return null;
  const params: Record<string, string> = {};
  for (const [i, part] of parts.entries()) {
    const segment = segments[i]!;
    if (part.startsWith(":")) {
      if (segment === "") return null;
      params[part.slice(1)] = segment;
    } else if (part !== segment) {
      return null;
    }
  }
  return params;
}

const literals = (pattern: string) => pattern.split("/").filter((s) => s !== "" && !s.startsWith(":")).length;
