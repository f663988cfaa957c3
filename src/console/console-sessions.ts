import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

/** The cookie that carries a session id (never the token). */
export const SESSION_COOKIE = "rabbit_inbox_console";
/** The header a script sends its session's CSRF token in; forms send the `_csrf` field. */
export const CSRF_HEADER = "x-csrf-token";

export interface ConsoleSession {
  id: string;
  /** Sent with every state-changing request from a page: a forged cross-site request cannot know it. */
  csrf: string;
  /** Who acts, as the audit records it: `console:<name given at login>`. */
  actor: string;
  expiresAt: number;
}

/** Who made a request, and how: a bearer token needs no CSRF token (a browser never adds it by itself). */
export type Caller =
  | { via: "bearer"; actor: string }
  | { via: "session"; actor: string; session: ConsoleSession }
  | { via: "open"; actor: string };

/** Sessions kept in memory at most, and per client (address): one client cannot push out another's. */
const MAX_SESSIONS = 1000;
const MAX_SESSIONS_PER_CLIENT = 20;
/** How an anonymous session's cookie starts: `a.<issued at, base 36>.<random>`. */
const ANONYMOUS = "a.";

/** A digest of fixed length, so comparing a wrong-length guess takes as long as a right one. */
const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();

/** `console:<name>` with the name cut to a sane length and stripped of control characters. */
export function consoleActor(name: string | undefined | null): string {
  const clean = (name ?? "").replace(/[\p{Cc}\p{Cf}]/gu, "").trim().slice(0, 64);
  return clean ? `console:${clean}` : "console";
}

/** Who a request comes from, for the limits per client: its peer address (IPv4 without the IPv6 prefix). */
export function clientOf(req: IncomingMessage): string {
  const address = req.socket?.remoteAddress ?? "unknown";
  return address.startsWith("::ffff:") ? address.slice(7) : address;
}

/**
 * Sessions of the web UI, in memory (a restart logs everyone out, which is the safe default), and
 * the check of the bearer token. Without a token (loopback only) every caller is let in; a page
 * visit still gets a session, because its CSRF token is what protects the POSTs.
 *
 * Those visits' sessions are anonymous and kept nowhere: the cookie carries its issue time and a
 * random part, and the CSRF token is an HMAC of the cookie under a key of this process. Any web
 * page the operator has open can make the browser visit a loopback console without its cookie
 * (SameSite keeps it back), as often as it likes; a session stored per visit would let it push
 * the operator's own session out. Sessions opened by a login are stored, at most
 * MAX_SESSIONS_PER_CLIENT per client address (a client's oldest goes first), so that one client
 * logging in again and again pushes out only its own.
 */
export class ConsoleSessions {
  private readonly sessions = new Map<string, ConsoleSession & { client: string }>();
  private readonly tokenDigest: Buffer | null;
  private readonly key = randomBytes(32);

  constructor(token: string | undefined, private readonly ttlMs = 8 * 3_600_000, private readonly now: () => number = Date.now) {
    this.tokenDigest = token ? digest(token) : null;
  }

  get requiresToken(): boolean {
    return this.tokenDigest !== null;
  }

  tokenMatches(candidate: string): boolean {
    return this.tokenDigest !== null && timingSafeEqual(digest(candidate), this.tokenDigest);
  }

  /** A new stored session after a login (with a token, or a name without one). */
  open(name: string | undefined, client = "unknown"): ConsoleSession {
    this.dropExpired();
    const mine = [...this.sessions.values()].filter((s) => s.client === client);
    if (mine.length >= MAX_SESSIONS_PER_CLIENT) this.sessions.delete(mine[0]!.id);
    if (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    const session = {
      id: randomBytes(32).toString("base64url"), csrf: randomBytes(32).toString("base64url"), actor: consoleActor(name), expiresAt: this.now() + this.ttlMs, client,
    };
    this.sessions.set(session.id, session);
    return session;
  }

  /** A page visit's session on a console without a token: nothing is stored (see the class). */
  openAnonymous(): ConsoleSession {
    if (this.requiresToken) throw new Error("a console with a token has no anonymous sessions");
    return this.anonymous(`${ANONYMOUS}${this.now().toString(36)}.${randomBytes(24).toString("base64url")}`)!;
  }

  close(id: string): void {
    this.sessions.delete(id);
  }

  /** The session a request's cookie names, when it is still valid. */
  sessionOf(req: IncomingMessage): ConsoleSession | null {
    const id = cookieValue(req.headers.cookie, SESSION_COOKIE);
    if (!id) return null;
    if (id.startsWith(ANONYMOUS)) return this.requiresToken ? null : this.anonymous(id);
    const session = this.sessions.get(id);
    if (!session) return null;
    if (session.expiresAt < this.now()) {
      this.sessions.delete(session.id);
      return null;
    }
    return session;
  }

  /** Who is calling; null when a token is required and neither it nor a session was given. */
  callerOf(req: IncomingMessage): Caller | null {
    const auth = req.headers.authorization;
    if (auth !== undefined && this.tokenDigest !== null) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(auth);
      if (match && this.tokenMatches(match[1]!)) return { via: "bearer", actor: consoleActor(headerText(req, "x-console-actor") ?? "api") };
      return null;
    }
    const session = this.sessionOf(req);
    if (session) return { via: "session", actor: session.actor, session };
    if (this.tokenDigest === null) return { via: "open", actor: consoleActor(headerText(req, "x-console-actor")) };
    return null;
  }

  /** The anonymous session a cookie value stands for, or null when it is malformed or expired. */
  private anonymous(id: string): ConsoleSession | null {
    const issued = Number.parseInt(id.slice(ANONYMOUS.length).split(".")[0] ?? "", 36);
    if (!/^a\.[0-9a-z]{1,12}\.[\w-]{32}$/.test(id) || !Number.isSafeInteger(issued)) return null;
    const expiresAt = issued + this.ttlMs;
    if (expiresAt < this.now()) return null;
    return { id, csrf: createHmac("sha256", this.key).update(id).digest("base64url"), actor: "console", expiresAt };
  }

  /** The Set-Cookie value: HttpOnly (no script reads it), SameSite=Strict (no other site sends it). */
  cookieFor(session: ConsoleSession, path: string, secure: boolean): string {
    return `${SESSION_COOKIE}=${session.id}; Path=${path}; HttpOnly; SameSite=Strict; Max-Age=${Math.floor(this.ttlMs / 1000)}${secure ? "; Secure" : ""}`;
  }

  expiredCookie(path: string): string {
    return `${SESSION_COOKIE}=; Path=${path}; HttpOnly; SameSite=Strict; Max-Age=0`;
  }

  private dropExpired(): void {
    const now = this.now();
    for (const [id, s] of this.sessions) if (s.expiresAt < now) this.sessions.delete(id);
  }
}

export function csrfMatches(session: ConsoleSession, given: string | undefined): boolean {
  return given !== undefined && given.length > 0 && timingSafeEqual(digest(given), digest(session.csrf));
}

/**
 * A browser names the page a request comes from in Origin (and Sec-Fetch-Site): a state-changing
 * request from another site is refused even before its CSRF token is looked at.
 */
export function sameOrigin(req: IncomingMessage): boolean {
  const site = headerText(req, "sec-fetch-site");
  if (site !== undefined && site !== "same-origin" && site !== "none") return false;
  const origin = headerText(req, "origin");
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

/** Host names that reach this machine only; a console without a token answers to these names only (DNS rebinding). */
export function isLoopbackHost(host: string): boolean {
  let name = host.trim().toLowerCase();
  const bracketed = /^\[(.*)\](?::\d+)?$/.exec(name);
  if (bracketed) name = bracketed[1]!;
  else if (name.split(":").length === 2) name = name.replace(/:\d+$/, "");
  return name === "localhost" || name === "::1" || name === "0:0:0:0:0:0:0:1" || /^(::ffff:)?127(\.\d{1,3}){3}$/.test(name);
}

export function headerText(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
