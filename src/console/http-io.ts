import type { IncomingMessage, ServerResponse } from "node:http";
import { escapeJsonControlCharacters } from "../core/control-characters.js";
import { ConsoleRequestError, invalidField } from "./console-request-error.js";
import type { Html } from "./html.js";
import type { Reply } from "./route.js";

const MAX_BODY_BYTES = 64 * 1024;

/**
 * Sent with every response: scripts and styles only from the console's own files (no inline
 * script can run, even if some text ever escaped its escaping), no framing, no referrer to other
 * sites. `same-origin` rather than `no-referrer`: under `no-referrer` a browser sends `Origin: null`
 * with a form POST, and the Origin check would refuse the console's own forms.
 */
const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "cache-control": "no-store",
};

function send(res: ServerResponse, status: number, type: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, "content-type": type, "content-length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

/** JSON whose strings hold no raw bidi, zero-width or control character (the same values once parsed), as the command's `--json`. */
export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  send(res, status, "application/json; charset=utf-8", escapeJsonControlCharacters(JSON.stringify(value)), headers);
}

export function sendHtml(res: ServerResponse, status: number, page: Html, headers: Record<string, string> = {}): void {
  send(res, status, "text/html; charset=utf-8", page.text, headers);
}

function sendAsset(res: ServerResponse, type: string, body: string): void {
  send(res, 200, type, body, { "cache-control": "public, max-age=300" });
}

export function redirect(res: ServerResponse, location: string, headers: Record<string, string> = {}): void {
  send(res, 303, "text/plain; charset=utf-8", "", { location, ...headers });
}

/** Sends what a route answered; `headers` go with a page (the cookie of a page visit's session). */
export function sendReply(res: ServerResponse, reply: Reply, headers: Record<string, string> = {}): void {
  if ("json" in reply) sendJson(res, reply.status ?? 200, reply.json, reply.headers);
  else if ("page" in reply) sendHtml(res, reply.status ?? 200, reply.page, { ...reply.headers, ...headers });
  else if ("redirect" in reply) redirect(res, reply.redirect, reply.headers);
  else sendAsset(res, reply.type, reply.asset);
}

/** A request body as fields: a JSON object, or a form (`application/x-www-form-urlencoded`). */
export async function readFields(req: IncomingMessage): Promise<Record<string, unknown>> {
  // A body read by something in front of the console is gone: acting on it as empty would turn
  // a mounting mistake into misleading answers ("reason required") for every change.
  const hadBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
  if (req.readableEnded && hadBody) {
    throw new Error("the request body was read before the console got it: mount the console before any body-parsing middleware (express.json(), Fastify's content-type parsers; docs/console.md)");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ConsoleRequestError("RI_CONSOLE_BODY_TOO_LARGE", `request body too large: at most ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (type === "application/json") {
    if (text.trim() === "") return {};
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw invalidField("body", "the body is not valid JSON");
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) throw invalidField("body", "the body must be a JSON object");
    return value as Record<string, unknown>;
  }
  if (type === "application/x-www-form-urlencoded" || text === "") return Object.fromEntries(new URLSearchParams(text));
  throw new ConsoleRequestError("RI_CONSOLE_UNSUPPORTED_MEDIA_TYPE", `unsupported content type ${JSON.stringify(type)}: send application/json or a form`);
}

/** True when the request was made over TLS, directly or (as a proxy says) in front of us. */
export function isSecure(req: IncomingMessage): boolean {
  return (req.socket as { encrypted?: boolean }).encrypted === true || req.headers["x-forwarded-proto"] === "https";
}
