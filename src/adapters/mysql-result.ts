import type { SqlRow } from "../store/sql/sql-query.js";

/**
 * One statement's result as mysql2 (and the mariadb driver) return it, the first element of
 * `[rows, fields]`: an array of rows for a statement that reads, an OK packet (ResultSetHeader)
 * for one that writes, with the server's `affectedRows` (INSERT ... ON DUPLICATE KEY UPDATE
 * counts 2 for a row it updated, which the claim relies on) and `insertId` (0 when the INSERT
 * inserted nothing, which the outbox relies on).
 */
export function mysqlResultOf(first: unknown): { rows: SqlRow[]; rowCount: number; insertId?: number } {
  if (Array.isArray(first)) return { rows: first as SqlRow[], rowCount: first.length };
  const header = (first ?? {}) as { affectedRows?: unknown; insertId?: unknown };
  const result: { rows: SqlRow[]; rowCount: number; insertId?: number } = { rows: [], rowCount: Number(header.affectedRows ?? 0) };
  if (header.insertId !== undefined && header.insertId !== null) result.insertId = Number(header.insertId);
  return result;
}
