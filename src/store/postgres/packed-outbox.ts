/**
 * Packed outbox rows on PostgreSQL: a transaction's messages handed to a relay of the same
 * process that keeps no sent rows are written as ONE row of `rabbit_inbox_outbox_packed`, every
 * column of the outbox as an array, instead of a row per message. The relay deletes it once
 * every message is confirmed: one row version and one index entry per transaction instead of a
 * row, its index entries and its deletion per message.
 *
 * Each message still has an id of the outbox's own sequence, drawn when it is written, so a key's
 * order by id spans both tables. Everything that is not the hot path unpacks a packed row into
 * outbox rows of their own, with those ids, and leaves the rest to the claims as before: a failed
 * publish or rows given back (the settlement), a lease that ran out (a claim), a duplicate's
 * resend. A claim also stops each ordering key at the oldest message of that key still packed, so
 * nothing overtakes a message a live process is publishing from memory.
 */

/** The packed rows' table and the outbox's id sequence, for a table prefix (`"schema".` or empty). */
export function packedNames(prefix: string): { table: string; outbox: string; sequence: string } {
  // The sequence goes into a string literal (a regclass): a quote in the schema name is doubled.
  return {
    table: `${prefix}rabbit_inbox_outbox_packed`,
    outbox: `${prefix}rabbit_inbox_outbox`,
    sequence: `${prefix.replace(/'/g, "''")}rabbit_inbox_outbox_id_seq`,
  };
}

/** The packed columns, in the order the write fills them and `unnest` reads them back. */
const PACKED_ARRAYS = "ids, message_ids, exchanges, routing_keys, bodies, properties, ordering_keys, source_tenants, source_handlers, source_event_ids";

/**
 * The packing write, its general form. Parameters: the nine column arrays of the records ($1
 * message ids ... $9 source event ids, as the row-per-message write takes them) and $10 the
 * lease in ms. A message id already in the outbox or in a packed row is not written again, and
 * one twice in the write keeps its first record, as the unique index does for rows of their own.
 * Returns per new message its id, its message id, the newest row of its key unsent before this
 * statement (an outbox row or a packed message; the statement reads one snapshot, so never its
 * own), and the packed row's id, in id order.
 */
export function packedWrite(prefix: string): string {
  const { table } = packedNames(prefix);
  return `WITH r AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::jsonb[], $6::text[], $7::text[], $8::text[], $9::text[])
          WITH ORDINALITY AS r(m, e, k, b, p, o, st, sh, se, ord)),
      ${usedIds(prefix)},
      fresh AS (
        SELECT DISTINCT ON (r.m) r.* FROM r WHERE NOT EXISTS (SELECT 1 FROM used WHERE used.m = r.m) ORDER BY r.m, r.ord),
      ${numberedAndPrevious(prefix, "fresh")},
      ins AS (
        INSERT INTO ${table} (lease_until, ${PACKED_ARRAYS})
        SELECT statement_timestamp() + $10 * interval '1 millisecond',
          array_agg(id ORDER BY ord), array_agg(m ORDER BY ord), array_agg(e ORDER BY ord), array_agg(k ORDER BY ord),
          array_agg(b ORDER BY ord), array_agg(p ORDER BY ord), array_agg(o ORDER BY ord),
          array_agg(st ORDER BY ord), array_agg(sh ORDER BY ord), array_agg(se ORDER BY ord)
        FROM numbered
        HAVING count(*) > 0
        RETURNING id)
      SELECT n.id, n.m AS message_id, previous.id AS previous, (SELECT id FROM ins) AS packed_id
      FROM numbered n LEFT JOIN previous ON previous.o = n.o
      ORDER BY n.id`;
}

/**
 * The packing write when no message id repeats within the write (the caller checks): the
 * parameter arrays go into the row as they came, with no re-aggregation. When one of the
 * message ids is already used (in the outbox or a packed row) it writes nothing and returns no
 * row, and the caller runs the general form. Same parameters as `packedWrite`; as every message
 * is new and takes its id in the write's order, the result is ONE row instead of one per
 * message: `packed_id`, `ids` (a JSON array of the messages' ids, in the write's order) and
 * `previous` (a JSON array of [ordering key, id] pairs: per key, the newest row or packed
 * message unsent before this statement, keys without one left out). JSON text reads the same
 * through every driver and costs no row per message to send and parse.
 */
export function packedWriteDistinct(prefix: string): string {
  const { table } = packedNames(prefix);
  return `WITH r AS (
        SELECT * FROM unnest($1::text[], $6::text[]) WITH ORDINALITY AS r(m, o, ord)),
      ${usedIds(prefix)},
      fresh AS (SELECT r.* FROM r WHERE NOT EXISTS (SELECT 1 FROM used)),
      ${numberedAndPrevious(prefix, "fresh")},
      ids AS (SELECT array_agg(id ORDER BY ord) AS ids FROM numbered),
      ins AS (
        INSERT INTO ${table} (lease_until, ${PACKED_ARRAYS})
        SELECT statement_timestamp() + $10 * interval '1 millisecond', ids.ids, $1, $2, $3, $4, $5, $6, $7, $8, $9
        FROM ids
        WHERE NOT EXISTS (SELECT 1 FROM used)
        RETURNING id)
      SELECT ins.id AS packed_id, array_to_json(ids.ids)::text AS ids,
        (SELECT coalesce(json_agg(json_build_array(p.o, p.id)), '[]')::text FROM previous p WHERE p.id IS NOT NULL) AS previous
      FROM ins CROSS JOIN ids`;
}

/**
 * `packed_messages`: every message waiting in a packed row (message id, ordering key, id), read
 * once for both probes; `used`: the message ids of $1 already used, by an outbox row (its unique
 * index) or a packed message.
 */
function usedIds(prefix: string): string {
  const { table, outbox } = packedNames(prefix);
  return `packed_messages AS (
        SELECT p.m, p.o, p.id FROM ${table} pk CROSS JOIN LATERAL unnest(pk.message_ids, pk.ordering_keys, pk.ids) AS p(m, o, id)),
      used AS (
        SELECT x.message_id AS m FROM ${outbox} x WHERE x.message_id = ANY($1::text[])
        UNION
        SELECT pm.m FROM packed_messages pm WHERE pm.m IN (SELECT r.m FROM r))`;
}

/**
 * `numbered`: the messages of `source` (with m, o, ord) with their ids, drawn in the write's order
 * (the sorted subquery is read in order); `previous`: per ordering key, the newest unsent row or
 * packed message before this statement (`packed_messages` from `usedIds`).
 */
function numberedAndPrevious(prefix: string, source: string): string {
  const { outbox, sequence } = packedNames(prefix);
  return `numbered AS (
        SELECT f.*, nextval('${sequence}') AS id FROM (SELECT * FROM ${source} ORDER BY ord) f),
      keys AS (SELECT DISTINCT o FROM numbered WHERE o IS NOT NULL),
      packed_newest AS (
        SELECT pm.o, max(pm.id) AS id FROM packed_messages pm WHERE pm.o IN (SELECT o FROM keys) GROUP BY pm.o),
      previous AS (
        SELECT keys.o, greatest((SELECT max(x.id) FROM ${outbox} x WHERE x.ordering_key = keys.o AND x.sent_at IS NULL), pn.id) AS id
        FROM keys LEFT JOIN packed_newest pn ON pn.o = keys.o)`;
}

/**
 * CTEs that unpack the packed rows `gone` (a DELETE ... RETURNING *) into outbox rows of their
 * own, with their ids: `msgs`, every message of those rows, and `unpacked`, the insert. `fate` is
 * the SELECT list's tail for available_at, attempts and last_error (it may read `msgs` and a
 * LEFT JOINed `f`), `join` what it joins, `where` which messages become rows. A message whose id
 * or message id is an outbox row already is left alone.
 */
export function unpackInto(prefix: string, fate: { join: string; columns: string; where: string }): string {
  const { outbox } = packedNames(prefix);
  return `msgs AS (
        SELECT u.* FROM gone CROSS JOIN LATERAL unnest(gone.${PACKED_ARRAYS.split(", ").join(", gone.")})
          AS u(id, m, e, k, b, p, o, st, sh, se)),
      unpacked AS (
        INSERT INTO ${outbox} (id, message_id, exchange, routing_key, body, properties, ordering_key, source_tenant, source_handler, source_event_id,
          available_at, attempts, last_error)
        SELECT msgs.id, msgs.m, msgs.e, msgs.k, msgs.b, msgs.p, msgs.o, msgs.st, msgs.sh, msgs.se, ${fate.columns}
        FROM msgs ${fate.join}
        WHERE ${fate.where}
        ORDER BY msgs.id
        ON CONFLICT DO NOTHING
        RETURNING 1)`;
}

/** Every message due now, no attempt counted. */
export const DUE_NOW = { join: "", columns: "now(), 0, NULL::text", where: "true" };

/**
 * Unpacks packed rows whose lease ran out (their process died, or holds them past its lease),
 * at most $1 of them, skipping those another session is unpacking or settling. Runs inside a
 * claim's transaction, before the claim reads the outbox: the claim then takes the messages as
 * rows. Returns how many messages it unpacked.
 */
export function unpackExpired(prefix: string): string {
  const { table } = packedNames(prefix);
  return `WITH gone AS (
        DELETE FROM ${table} WHERE id IN (
          SELECT id FROM ${table} WHERE lease_until <= now() ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING *),
      ${unpackInto(prefix, DUE_NOW)}
      SELECT count(*)::int AS n FROM unpacked`;
}

/**
 * Per ordering key of $1, the oldest message still packed: a claim takes no row of that key
 * from there on, whoever holds the packed row.
 */
export function packedKeyHeads(prefix: string): string {
  const { table } = packedNames(prefix);
  return `SELECT p.o AS ordering_key, min(p.id) AS id FROM ${table} pk CROSS JOIN LATERAL unnest(pk.ordering_keys, pk.ids) AS p(o, id)
      WHERE p.o = ANY($1::text[]) GROUP BY p.o`;
}

/** Messages waiting in packed rows, counted whole: a subquery for the pending count. */
export function packedCount(prefix: string): string {
  return `(SELECT coalesce(sum(cardinality(ids)), 0) FROM ${packedNames(prefix).table})`;
}
