import type { IncomingMessage, ServerResponse } from "node:http";
import { InboxError, describeError } from "../core/errors.js";
import { redactSecrets } from "../core/redact-secrets.js";
import { authenticate, withPageSession } from "./console-auth.js";
import { ConsoleContext, type ConsoleOptions } from "./console-context.js";
import { ConsoleRequestError } from "./console-request-error.js";
import { CONSOLE_ROUTES } from "./console-routes.js";
import { httpStatusOf } from "./http-status.js";
import { readFields, redirect, sendHtml, sendJson, sendReply } from "./http-io.js";
import { errorPage } from "./panel-pages.js";
import { fieldsOf, queryOf } from "./request-schema.js";
import { checkFormCsrf, checkStateChange, refuseCrossSite, refuseForeignHost } from "./request-guards.js";
import { type Route, findRoute, isApiPath } from "./route.js";

/** A node:http request handler, with `close()` for what it opened (its store, its broker connection). */
export type ConsoleHandler = ((req: IncomingMessage, res: ServerResponse) => void) & { close(): Promise<void> };

/**
 * The operator console: a JSON API under `/api` and the web pages, as one request handler for
 * node:http (`http.createServer(handler)`), Express (`app.use("/console", handler)`) or Fastify
 * (see docs/console.md). With a `token`, every request needs it (`Authorization: Bearer`) or the
 * session cookie the login page sets; without one, only loopback host names are answered.
 */
export function createConsoleHandler(options: ConsoleOptions): ConsoleHandler {
  const ctx = new ConsoleContext(options);
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    handle(ctx, req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: "internal error" });
      else res.destroy(error instanceof Error ? error : undefined);
    });
  };
  return Object.assign(handler, { close: () => ctx.close() });
}

/**
 * Every request takes the same way through the route table (console-routes.ts): the console's
 * files for anyone; then the host check, the login form, the caller (401, or the login page);
 * only then whether the route exists (so that nobody unauthenticated learns which do); then for
 * a change the origin and the CSRF token; then the route's schemas read the request, and its
 * handler runs on what they returned.
 */
async function handle(ctx: ConsoleContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://console.invalid");
  let path = url.pathname;
  // Mounted under a prefix that the framework did not strip (Fastify, a bare node:http router).
  if (ctx.basePath && (path === ctx.basePath || path.startsWith(`${ctx.basePath}/`))) path = path.slice(ctx.basePath.length) || "/";
  const api = isApiPath(path);
  const method = req.method ?? "GET";
  try {
    const { route: r, params, miss } = findRoute(CONSOLE_ROUTES, method, path);
    /** What the route's schemas read of the request: all a handler gets to see of it. */
    const parts = (route: Route, fields: Record<string, unknown>) => ({
      ctx, req, params: route.params.parse(fieldsOf(params)), query: route.query.parse(queryOf(url.searchParams)), body: route.body.parse(fieldsOf(fields)),
    });
    if (r?.access === "public") return sendReply(res, await r.handle(parts(r, {})));
    refuseForeignHost(ctx, req);
    if (r?.access === "guest") {
      if (r.method === "POST") refuseCrossSite(req);
      return sendReply(res, await r.handle(parts(r, r.method === "POST" ? await readFields(req) : {})));
    }
    const caller = authenticate(ctx, req);
    if (!caller) {
      if (!api) return redirect(res, ctx.href("/login"));
      throw new ConsoleRequestError("RI_CONSOLE_UNAUTHENTICATED", "unauthorized: send Authorization: Bearer <token>, or log in", {
        headers: { "www-authenticate": 'Bearer realm="rabbit-inbox console"' },
      });
    }
    if (r === null) throw miss;
    const visit = r.method === "GET" && !api ? withPageSession(ctx, req, caller) : { caller, headers: {} };
    let fields: Record<string, unknown> = {};
    if (r.method === "POST") {
      checkStateChange(req, visit.caller, api);
      fields = await readFields(req);
      if (!api) checkFormCsrf(visit.caller, fields);
    }
    const session = visit.caller.via === "session" ? visit.caller.session : null;
    sendReply(res, await r.handle({ ...parts(r, fields), caller: visit.caller, session }), visit.headers);
  } catch (error) {
    const status = httpStatusOf(error);
    if (status === 500) ctx.options.logger?.error("console request failed", { method, path, error: redactSecrets(describeError(error)) });
    // Never a password: a driver's error can quote its connection string.
    const message = `${status === 500 ? "internal error: " : ""}${redactSecrets(describeError(error))}`;
    const refusal = error instanceof ConsoleRequestError ? error : null;
    if (!api) return sendHtml(res, status, errorPage(ctx, status, message), refusal?.headers);
    sendJson(res, status, {
      error: message, ...(error instanceof InboxError ? { code: error.code } : {}), ...(refusal?.field !== undefined ? { field: refusal.field } : {}),
    }, refusal?.headers);
  }
}
