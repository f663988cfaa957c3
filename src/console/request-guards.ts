import type { IncomingMessage } from "node:http";
import type { ConsoleContext } from "./console-context.js";
import { ConsoleRequestError } from "./console-request-error.js";
import { type Caller, CSRF_HEADER, csrfMatches, headerText, isLoopbackHost, sameOrigin } from "./console-sessions.js";

const forbidden = (message: string) => new ConsoleRequestError("RI_CONSOLE_FORBIDDEN", message);

/**
 * A console without a token (and not behind the application's own authentication) answers to
 * loopback host names only: a web page that rebinds its own DNS name to 127.0.0.1 reaches the
 * socket, but with its own name in `Host`.
 */
export function refuseForeignHost(ctx: ConsoleContext, req: IncomingMessage): void {
  if (ctx.sessions.requiresToken || ctx.options.authenticatedCaller || isLoopbackHost(req.headers.host ?? "")) return;
  throw forbidden("this console has no token and answers to loopback host names only (localhost, 127.0.0.1, [::1]); set RABBIT_INBOX_CONSOLE_TOKEN to serve it under another name");
}

/** A change never comes from another site (Origin, Sec-Fetch-Site): the login form's included. */
export function refuseCrossSite(req: IncomingMessage): void {
  if (!sameOrigin(req)) throw forbidden("cross-site request refused (Origin)");
}

/**
 * A change must come from the console's own pages or from an API client: never from another site
 * (Origin), and from a session only with its CSRF token. A bearer token is never added by a browser
 * on its own, so it needs neither. Without a token, an API client sends JSON, which no other site
 * can send here without a CORS preflight this handler never grants. A page's form carries its
 * token in the body: see checkFormCsrf, once the body is read.
 */
export function checkStateChange(req: IncomingMessage, caller: Caller, api: boolean): void {
  if (caller.via === "bearer") return;
  refuseCrossSite(req);
  if (!api) return;
  if (caller.via === "session" && csrfMatches(caller.session, headerText(req, CSRF_HEADER))) return;
  const json = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase() === "application/json";
  if (caller.via === "open" && json) return;
  throw forbidden(`CSRF check failed: send the ${CSRF_HEADER} header of your session (or use Authorization: Bearer)`);
}

/** A page's form: the session's CSRF token in its hidden `_csrf` field. */
export function checkFormCsrf(caller: Caller, fields: Readonly<Record<string, unknown>>): void {
  if (caller.via === "bearer") return;
  const given = typeof fields._csrf === "string" ? fields._csrf : undefined;
  if (caller.via === "session" && csrfMatches(caller.session, given)) return;
  throw forbidden("the form's CSRF token is missing or wrong: reload the page and try again");
}
