/**
 * Masks credentials in text about to be printed or logged: the password of every URL
 * (`scheme://user:PASSWORD@host`), secret-named query parameters (`?password=...`,
 * `&sslpassword=...`, `token`, `secret`, ...), `password=...` pairs of keyword/value connection
 * strings, and `"password": "..."` members of JSON text.
 *
 * Errs on the side of hiding too much: where a URL is ambiguous (an unencoded `@`, `:` or `/` in
 * the password, or an `@` later in the URL), everything from the user's `:` to the URL's LAST
 * `@` is masked, because that is the part a driver may take for the password. A host may then be
 * hidden in an odd URL; a password is never shown.
 */
export function redactSecrets(text: string): string {
  return text
    .replace(URL_TOKEN, redactUrl)
    .replace(KEYWORD_PAIR, (_all, before: string, name: string) => `${before}${name}=${MASK}`)
    .replace(JSON_MEMBER, (_all, name: string) => `"${name}":"${MASK}"`);
}

const MASK = "***";

/**
 * A URL runs from its scheme to the first whitespace, quote or angle bracket, or to a comma that
 * starts the next URL of a list (`amqp://a,amqp://b`). A backslash escape (`\"` in JSON text)
 * stays inside the URL: a password holding a quote must not end the URL early and show the rest.
 */
const URL_TOKEN = /[a-z][a-z0-9+.-]*:\/\/(?:\\.|(?!,[a-z][a-z0-9+.-]*:\/\/)[^\s"'`<>\\])*/gi;

/** `scheme://user:` then the password, greedy to the last `@`: a password may hold `@`, `:`, `/`. */
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[\s\S]*@/i;

/** Query parameters; `;` separates them in some drivers' URLs. */
const QUERY_PARAMETER = /([?&;])([^=&#;?]+)=([^&#;]*)/g;

/** Names whose value is a secret, compared after percent-decoding and lower-casing. */
const SECRET_NAME = /(?:pass|passwd|password|pwd|secret|token|apikey|api_key|api-key|credential|credentials)$/;

/** libpq-style `password=value` (bare or single-quoted) at the start of a word. */
const KEYWORD_PAIR = /(^|[\s,;({])((?:ssl)?password|passwd|pwd)\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s,;)}]+)/gi;

/** `"password": "..."` in JSON text (a logged configuration object). */
const JSON_MEMBER = /"([a-z_-]*(?:password|passwd|pwd|secret|token))"\s*:\s*"(?:[^"\\]|\\.)*"/gi;

function redactUrl(url: string): string {
  const withoutPassword = url.replace(USERINFO, `$1${MASK}@`);
  return withoutPassword.replace(QUERY_PARAMETER, (all, separator: string, name: string) =>
    SECRET_NAME.test(decodeName(name)) ? `${separator}${name}=${MASK}` : all);
}

function decodeName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, " ")).trim().toLowerCase();
  } catch {
    return name.toLowerCase();
  }
}
