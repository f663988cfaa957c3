import { escapeControlCharacters } from "../core/control-characters.js";

/**
 * HTML built from templates whose every interpolated value is escaped unless it is already
 * markup built the same way. Message bodies, tenants, reasons and handler names come from
 * producers and operators: none of them may ever become markup, and none may reorder or hide
 * what the page shows (a bidi override, a zero-width character, a decomposed look-alike id):
 * those are shown as escapes, `evt-\u202egnp.exe`, exactly as the command shows them.
 */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

function render(value: Value): string {
  if (value === null || value === undefined || value === false) return "";
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return (value as readonly Value[]).map(render).join("");
  return escapeHtml(escapeControlCharacters(String(value)));
}

/**
 * A form field's value as it is (HTML-escaped only): what a form sends back must be what it was
 * given, or a filter holding such a character would select something else once submitted.
 */
export function formValue(text: string): Html {
  return new Html(escapeHtml(text));
}

/** A tagged template: `html\`<td>${untrusted}</td>\`` escapes `untrusted`. */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

/** A query string from the non-empty values, for links that keep the current filter. */
export function queryString(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") search.set(k, String(v));
  const text = search.toString();
  return text ? `?${text}` : "";
}
