import type { IncomingMessage, ServerResponse } from "node:http";
import { describeError } from "../core/errors.js";
import { redactSecrets } from "../core/redact-secrets.js";
import { serveApi, statusOf } from "./console-api.js";
import { CONSOLE_CSS, CONSOLE_ICON, CONSOLE_JS } from "./console-assets.js";
import { ConsoleContext, type ConsoleOptions } from "./console-context.js";
import { type Caller, CSRF_HEADER, type ConsoleSession, clientOf, consoleActor, csrfMatches, headerText, isLoopbackHost, sameOrigin } from "./console-sessions.js";
import { isSecure, readFields, redirect, sendAsset, sendHtml, sendJson } from "./http-io.js";
import { errorPage, loginPage } from "./panel-pages.js";
import { servePages } from "./quarantine-pages.js";

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

async function handle(ctx: ConsoleContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://console.invalid");
  let path = url.pathname;
  // Mounted under a prefix that the framework did not strip (Fastify, a bare node:http router).
  if (ctx.basePath && (path === ctx.basePath || path.startsWith(`${ctx.basePath}/`))) path = path.slice(ctx.basePath.length) || "/";
  const api = path === "/api" || path.startsWith("/api/");
  const method = req.method ?? "GET";
  try {
    if (method === "GET" && path === "/assets/console.css") return sendAsset(res, "text/css; charset=utf-8", CONSOLE_CSS);
    if (method === "GET" && path === "/assets/console.js") return sendAsset(res, "text/javascript; charset=utf-8", CONSOLE_JS);
    // The pages link the icon; /favicon.ico is where a browser looks without a link (a console at the root).
    if (method === "GET" && (path === "/assets/favicon.svg" || path === "/favicon.ico")) return sendAsset(res, "image/svg+xml", CONSOLE_ICON);
    const vouched = ctx.options.authenticatedCaller;
    if (!ctx.sessions.requiresToken && !vouched && !isLoopbackHost(req.headers.host ?? "")) {
      throw new Refusal(403, "this console has no token and answers to loopback host names only (localhost, 127.0.0.1, [::1]); set RABBIT_INBOX_CONSOLE_TOKEN to serve it under another name");
    }
    if (path === "/login") return await login(ctx, req, res, method);
    // A bearer token is checked at once (synchronously): concurrent guesses cannot all slip in before the first failure counts.
    const bearer = ctx.sessions.requiresToken && req.headers.authorization !== undefined;
    if (bearer) refuseIfThrottled(ctx, req);
    let caller = ctx.sessions.callerOf(req);
    if (!caller && bearer) authenticationFailed(ctx, req, "bearer");
    // The application vouched for the request: the audit names its caller, never a header's.
    if (vouched && caller) caller = { ...caller, actor: consoleActor(vouched(req)) };
    if (!caller) {
      if (api) {
        sendJson(res, 401, { error: "unauthorized: send Authorization: Bearer <token>, or log in" }, { "www-authenticate": 'Bearer realm="rabbit-inbox console"' });
        return;
      }
      return redirect(res, ctx.href("/login"));
    }
    let setCookie: Record<string, string> = {};
    if (caller.via === "open" && !api && method === "GET") {
      // No token: a page visit still gets a session, whose CSRF token guards the page's forms.
      const session = ctx.sessions.openAnonymous();
      setCookie = { "set-cookie": ctx.sessions.cookieFor(session, ctx.basePath || "/", isSecure(req)) };
      caller = { via: "session", actor: vouched ? consoleActor(vouched(req)) : session.actor, session };
    }
    if (method === "POST") checkStateChange(req, caller, api);
    if (api) {
      if (!(await serveApi(ctx, req, res, path.slice(4) || "/", url.searchParams, caller))) sendJson(res, method === "GET" || method === "POST" ? 404 : 405, { error: `no ${method} ${path}` });
      return;
    }
    const session = caller.via === "session" ? caller.session : null;
    if (method === "POST") {
      const fields = await readFields(req);
      if (caller.via !== "bearer" && !(session && csrfMatches(session, typeof fields._csrf === "string" ? fields._csrf : undefined))) {
        throw new Refusal(403, "the form's CSRF token is missing or wrong: reload the page and try again");
      }
      if (path === "/logout") return logout(ctx, req, res, session);
      if (!(await servePages(ctx, { req, res, path, query: url.searchParams, caller, session, fields }))) throw new Refusal(404, `no page ${path}`);
      return;
    }
    if (method !== "GET" && method !== "HEAD") throw new Refusal(405, `${method} is not allowed: reads are GET, changes are POST`);
    if (!(await servePages(ctx, { req, res, path, query: url.searchParams, caller, session, fields: {}, headers: setCookie }))) throw new Refusal(404, `no page ${path}`);
  } catch (error) {
    const status = error instanceof Refusal ? error.status : statusOf(error);
    if (status === 500) ctx.options.logger?.error("console request failed", { method, path, error: redactSecrets(describeError(error)) });
    // Never a password: a driver's error can quote its connection string.
    const message = status === 500 ? `internal error: ${redactSecrets(describeError(error))}` : redactSecrets(describeError(error));
    const headers = error instanceof Refusal ? error.headers : {};
    if (api) sendJson(res, status, { error: message }, headers);
    else sendHtml(res, status, errorPage(ctx, status, message), headers);
  }
}

/** A request refused before it reaches an operation. */
class Refusal extends Error {
  constructor(readonly status: number, message: string, readonly headers: Record<string, string> = {}) {
    super(message);
  }
}

/** 429 while the client has failed to authenticate too often (see AuthThrottle). */
function refuseIfThrottled(ctx: ConsoleContext, req: IncomingMessage): void {
  const waitMs = ctx.throttle.blockedFor(clientOf(req));
  if (waitMs === 0) return;
  const seconds = Math.ceil(waitMs / 1000);
  throw new Refusal(429, `too many failed authentications from this client: try again in ${seconds} s`, { "retry-after": String(seconds) });
}

/** Counts the failure against the client and logs it (repeats throttled), never with the token. */
function authenticationFailed(ctx: ConsoleContext, req: IncomingMessage, via: "bearer" | "login"): void {
  const client = clientOf(req);
  const failures = ctx.throttle.fail(client);
  ctx.authLog?.warn("console authentication failed", { client, via, failuresWithinMinute: failures, blockedForMs: ctx.throttle.blockedFor(client) });
}

/**
 * A change must come from the console's own pages or from an API client: never from another site
 * (Origin), and from a session only with its CSRF token. A bearer token is never added by a browser
 * on its own, so it needs neither. Without a token, an API client sends JSON, which no other site
 * can send here without a CORS preflight this handler never grants.
 */
function checkStateChange(req: IncomingMessage, caller: Caller, api: boolean): void {
  if (caller.via === "bearer") return;
  if (!sameOrigin(req)) throw new Refusal(403, "cross-site request refused (Origin)");
  if (!api) return; // the form's _csrf field is checked once the body is read
  if (caller.via === "session" && csrfMatches(caller.session, headerText(req, CSRF_HEADER))) return;
  const json = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase() === "application/json";
  if (caller.via === "open" && json) return;
  throw new Refusal(403, `CSRF check failed: send the ${CSRF_HEADER} header of your session (or use Authorization: Bearer)`);
}

async function login(ctx: ConsoleContext, req: IncomingMessage, res: ServerResponse, method: string): Promise<void> {
  if (method === "GET") return sendHtml(res, 200, loginPage(ctx, null));
  if (method !== "POST") throw new Refusal(405, "log in with a POST");
  if (!sameOrigin(req)) throw new Refusal(403, "cross-site request refused (Origin)");
  const fields = await readFields(req);
  const token = typeof fields.token === "string" ? fields.token : "";
  if (ctx.sessions.requiresToken) {
    refuseIfThrottled(ctx, req);
    if (!ctx.sessions.tokenMatches(token)) {
      authenticationFailed(ctx, req, "login");
      // A wrong guess costs a little time as well.
      await new Promise((done) => setTimeout(done, 250));
      return sendHtml(res, 401, loginPage(ctx, "wrong token"));
    }
  }
  const session = ctx.sessions.open(typeof fields.name === "string" ? fields.name : undefined, clientOf(req));
  redirect(res, ctx.href("/"), { "set-cookie": ctx.sessions.cookieFor(session, ctx.basePath || "/", isSecure(req)) });
}

function logout(ctx: ConsoleContext, req: IncomingMessage, res: ServerResponse, session: ConsoleSession | null): void {
  if (session) ctx.sessions.close(session.id);
  redirect(res, ctx.href(ctx.sessions.requiresToken ? "/login" : "/"), { "set-cookie": ctx.sessions.expiredCookie(ctx.basePath || "/") });
}
