/**
 * The suffix of the inbox's prepared-statement names for a schema. node-postgres prepares a named
 * statement once per pooled client and refuses one name for two texts; the schema is part of the
 * text, so two stores on one pool in different schemas need different names.
 */
export function statementTag(schema: string): string {
  return schema ? `_${Buffer.from(schema).toString("hex").slice(0, 40)}` : "";
}
