import type { IncomingMessage } from "node:http";
import type { ConsoleContext } from "./console-context.js";
import { ConsoleRequestError } from "./console-request-error.js";
import type { LOGIN_BODY } from "./console-schemas.js";
import { type Caller, clientOf, consoleActor } from "./console-sessions.js";
import { statusOfCode } from "./http-status.js";
import { isSecure } from "./http-io.js";
import { loginPage } from "./panel-pages.js";
import type { Parsed } from "./request-schema.js";
import type { Call, CallerCall, Reply } from "./route.js";

/**
 * Who is calling: a bearer token, a session's cookie, or (without a token) anyone on a loopback
 * name; null when a token is required and neither it nor a session came. With the
 * application's `authenticatedCaller`, the audit names the caller the application vouched for,
 * never a header's.
 */
export function authenticate(ctx: ConsoleContext, req: IncomingMessage): Caller | null {
  // A bearer token is checked at once (synchronously): concurrent guesses cannot all slip in before the first failure counts.
  const bearer = ctx.sessions.requiresToken && req.headers.authorization !== undefined;
  if (bearer) refuseIfThrottled(ctx, req);
  const caller = ctx.sessions.callerOf(req);
  if (!caller && bearer) authenticationFailed(ctx, req, "bearer");
  const vouched = ctx.options.authenticatedCaller;
  return vouched && caller ? { ...caller, actor: consoleActor(vouched(req)) } : caller;
}

/** Without a token, a page visit still gets a session, whose CSRF token guards the page's forms; its cookie goes with the page. */
export function withPageSession(ctx: ConsoleContext, req: IncomingMessage, caller: Caller): { caller: Caller; headers: Record<string, string> } {
  if (caller.via !== "open") return { caller, headers: {} };
  const session = ctx.sessions.openAnonymous();
  return {
    // The actor the application vouched for stays; otherwise the page's own, never a header's.
    caller: { via: "session", actor: ctx.options.authenticatedCaller ? caller.actor : session.actor, session },
    headers: { "set-cookie": ctx.sessions.cookieFor(session, ctx.basePath || "/", isSecure(req)) },
  };
}

/** 429 while the client has failed to authenticate too often (see AuthThrottle). */
function refuseIfThrottled(ctx: ConsoleContext, req: IncomingMessage): void {
  const waitMs = ctx.throttle.blockedFor(clientOf(req));
  if (waitMs === 0) return;
  const seconds = Math.ceil(waitMs / 1000);
  throw new ConsoleRequestError("RI_CONSOLE_THROTTLED", `too many failed authentications from this client: try again in ${seconds} s`, { headers: { "retry-after": String(seconds) } });
}

/** Counts the failure against the client and logs it (repeats throttled), never with the token. */
function authenticationFailed(ctx: ConsoleContext, req: IncomingMessage, via: "bearer" | "login"): void {
  const client = clientOf(req);
  const failures = ctx.throttle.fail(client);
  ctx.authLog?.warn("console authentication failed", { client, via, failuresWithinMinute: failures, blockedForMs: ctx.throttle.blockedFor(client) });
}

/** The login form's POST: the token once (throttled per client, a wrong one costs time), then a session cookie. */
export async function login({ ctx, req, body }: Call<unknown, unknown, Parsed<typeof LOGIN_BODY>>): Promise<Reply> {
  if (ctx.sessions.requiresToken) {
    refuseIfThrottled(ctx, req);
    if (!ctx.sessions.tokenMatches(body.token ?? "")) {
      authenticationFailed(ctx, req, "login");
      // A wrong guess costs a little time as well.
      await new Promise((done) => setTimeout(done, 250));
      return { page: loginPage(ctx, "wrong token"), status: statusOfCode("RI_CONSOLE_UNAUTHENTICATED") };
    }
  }
  const session = ctx.sessions.open(body.name, clientOf(req));
  return { redirect: ctx.href("/"), headers: { "set-cookie": ctx.sessions.cookieFor(session, ctx.basePath || "/", isSecure(req)) } };
}

export function logout({ ctx, session }: CallerCall<unknown, unknown, unknown>): Reply {
  if (session) ctx.sessions.close(session.id);
  return { redirect: ctx.href(ctx.sessions.requiresToken ? "/login" : "/"), headers: { "set-cookie": ctx.sessions.expiredCookie(ctx.basePath || "/") } };
}
