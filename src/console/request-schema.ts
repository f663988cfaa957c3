import { invalidField } from "./console-request-error.js";

/**
 * The parts of a request a route reads (its path parameters, its query, its body) are declared
 * as schemas: each field reads its value, checks it, and refuses it with a 400 that names it.
 * A handler only ever sees what its schemas returned. Names a schema does not declare are
 * ignored (a form carries `_csrf`, a link keeps the filter), never passed on.
 */

/** Where a request's values come from: a query string, a path's parameters, a form or a JSON object. */
export type Source = (name: string) => unknown;

/** Reads the field named `key` from `source`; `label` is how messages name it (`filter.since`). */
export type Field<T> = (source: Source, key: string, label: string) => T;

export interface Schema<T> {
  /** The names it reads, for tests and for the documentation of a route. */
  readonly names: readonly string[];
  /** `prefix` goes before every name in messages, for a schema nested in a field. */
  parse(source: Source, prefix?: string): T;
}

/** What a schema returns. */
export type Parsed<S> = S extends Schema<infer T> ? T : never;

type Shape = Record<string, Field<unknown>>;
type Fields<S extends Shape> = { [K in keyof S]: ReturnType<S[K]> };

export interface SchemaOptions<S extends Shape> {
  /** Another name a field is read under when its own is absent (`accept_new` for `acceptNew`). */
  aliases?: Partial<Record<keyof S & string, string>>;
  /** Rules between fields, once each one is read: `fail` refuses the request naming one field. */
  check?: (value: Fields<S>, fail: (field: keyof S & string, message: string) => never) => void;
}

export function schema<S extends Shape>(shape: S, options: SchemaOptions<S> = {}): Schema<Fields<S>> {
  const names = Object.keys(shape);
  return {
    names,
    parse(source, prefix = "") {
      const value: Record<string, unknown> = {};
      for (const name of names) {
        const alias = options.aliases?.[name];
        const from: Source = alias === undefined ? source : (key) => source(key) ?? (key === name ? source(alias) : undefined);
        const read = shape[name]!(from, name, `${prefix}${name}`);
        if (read !== undefined) value[name] = read;
      }
      const fields = value as Fields<S>;
      options.check?.(fields, (field, message) => { throw invalidField(`${prefix}${field}`, message); });
      return fields;
    },
  };
}

/** A field that reads one value; empty text (a blank form field, `?x=`) counts as absent. */
function value<T>(convert: (value: unknown, label: string) => T | undefined): Field<T | undefined> {
  return (source, key, label) => {
    const raw = source(key);
    if (raw === undefined || raw === null || (typeof raw === "string" && raw.trim() === "")) return undefined;
    return convert(raw, label);
  };
}

/** Text (a number counts as its text), trimmed. */
export const text = (): Field<string | undefined> => value((v, label) => {
  if (typeof v === "string") return v.trim();
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  throw invalidField(label, `${label} must be text`);
});

/** Text exactly as sent, spaces included (a token). */
export const rawText = (): Field<string | undefined> => (source, key, label) => {
  const raw = source(key);
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "string") throw invalidField(label, `${label} must be text`);
  return raw;
};

/** A positive integer, as digits or a JSON number; anything else is a 400, never a value passed on to the database. */
export const positiveInteger = (options: { max?: number } = {}): Field<number | undefined> => value((v, label) => {
  const n = typeof v === "number" ? v : typeof v === "string" && /^\d+$/.test(v.trim()) ? Number(v.trim()) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw invalidField(label, `${label} must be a positive integer, not ${JSON.stringify(v)}`);
  if (options.max !== undefined && n > options.max) throw invalidField(label, `${label} is at most ${options.max}`);
  return n;
});

export const positiveNumber = (): Field<number | undefined> => value((v, label) => {
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v.trim()) : Number.NaN;
  if (!Number.isFinite(n) || n <= 0) throw invalidField(label, `${label} must be a positive number, not ${JSON.stringify(v)}`);
  return n;
});

const TRUE = new Set<unknown>([true, "true", "on", "1"]);
const FALSE = new Set<unknown>([false, "false", "off", "0"]);

/** A JSON boolean or a form's checkbox (`on`, `true`, `1`); absent is false. */
export const flag = (): Field<boolean> => {
  const read = value((v, label) => {
    if (TRUE.has(v)) return true;
    if (FALSE.has(v)) return false;
    throw invalidField(label, `${label} must be true or false, not ${JSON.stringify(v)}`);
  });
  return (source, key, label) => read(source, key, label) ?? false;
};

export const oneOf = <const T extends string>(choices: readonly T[]): Field<T | undefined> => value((v, label) => {
  if (typeof v === "string" && (choices as readonly string[]).includes(v.trim())) return v.trim() as T;
  throw invalidField(label, `${label} must be ${choices.slice(0, -1).join(", ")} or ${choices.at(-1)}, not ${JSON.stringify(v)}`);
});

export const withDefault = <T>(field: Field<T | undefined>, fallback: T): Field<T> => (source, key, label) => field(source, key, label) ?? fallback;

/** `message` says what is missing; `{label}` in it becomes the field's name. */
export const required = <T>(field: Field<T | undefined>, message = "{label} is required"): Field<T> => (source, key, label) => {
  const read = field(source, key, label);
  if (read === undefined) throw invalidField(label, message.replaceAll("{label}", label));
  return read;
};

/**
 * A schema under one field: a JSON object (`"filter": { "reason": "invalid" }`), or a form's
 * fields named `<field>.<name>` (`filter.reason=invalid`).
 */
export const nested = <T>(inner: Schema<T>): Field<T> => (source, key, label) => {
  const object = source(key);
  if (object === undefined || object === null) return inner.parse((name) => source(`${key}.${name}`), `${label}.`);
  if (typeof object !== "object" || Array.isArray(object)) throw invalidField(label, `${label} must be an object`);
  return inner.parse((name) => (Object.hasOwn(object, name) ? (object as Record<string, unknown>)[name] : undefined), `${label}.`);
};

/** Nothing to read. */
export const NOTHING: Schema<Record<string, never>> = schema({});

/** A source over a plain object's own fields (a parsed body, a route's parameters). */
export function fieldsOf(object: Readonly<Record<string, unknown>>): Source {
  return (name) => (Object.hasOwn(object, name) ? object[name] : undefined);
}

/** A source over a query string; a repeated parameter reads as its first value. */
export function queryOf(query: URLSearchParams): Source {
  return (name) => query.get(name) ?? undefined;
}
