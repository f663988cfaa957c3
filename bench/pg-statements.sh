#!/usr/bin/env bash
# Where PostgreSQL's time goes, statement by statement: runs bench scenarios against a server of
# its own (PostgreSQL 15 with pg_stat_statements loaded, on a loopback port beside the machine's
# server, which this script never touches) and prints, per scenario, each statement's execution
# time, buffer pages and WAL per event.
#
#   bench/pg-statements.sh [--port PORT] [--messages N] SCENARIO...
#
#   e.g. bench/pg-statements.sh ledger ledger-by-hand
#
# The server listens on PORT (default 5451, LOCAL_PG_STATS_PORT), keeps its data under
# /tmp/rabbit-inbox-pg-stats-PORT while it runs, and is stopped and deleted at the end. Compiles
# the bench first. Runs as root (the server runs as the postgres user) or as postgres.
set -euo pipefail

SET_NAME=pg-statements
# shellcheck source=scripts/local-set.sh
. "$(dirname "$0")/../scripts/local-set.sh"

PORT="${LOCAL_PG_STATS_PORT:-5451}"
MESSAGES=50000
parse_options --port=PORT --messages=MESSAGES -- "$@"
set -- "$COMMAND" "${ARGS[@]}"
check_port "$PORT"
avoid_port 5432 "$PORT" 1 PostgreSQL
[[ "$MESSAGES" =~ ^[1-9][0-9]*$ ]] || die "--messages must be a positive integer, got '$MESSAGES'"
for scenario in "$@"; do [[ "$scenario" =~ ^[a-z-]+$ ]] || die "not a scenario name: '$scenario'"; done
DIR="/tmp/rabbit-inbox-pg-stats-$PORT"
check_dir "$DIR"

# shellcheck source=scripts/postgres-node.sh
. "$(dirname "$0")/../scripts/postgres-node.sh"

cleanup() { stop_node "$DIR/data"; rm -rf "$DIR"; }
trap cleanup EXIT
prepare_dir "$DIR"
init_node "$DIR/data" "$PORT" "$DIR"
# The machine's server's shared_buffers, so the figures compare with the bench's usual runs.
as_postgres sh -c "cat >> '$DIR/data/postgresql.conf'" <<CONF
shared_buffers = 128MB
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
CONF
start_node "$DIR/data" "$PORT"
pg_sql "$PORT" "CREATE DATABASE bench" >/dev/null
psql_bench() { as_postgres "$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d bench -X -q "$@"; }
psql_bench -c "CREATE EXTENSION pg_stat_statements" >/dev/null

cd "$(dirname "$0")/.."
npx tsc -p tsconfig.bench.json
for scenario in "$@"; do
  psql_bench -c "SELECT pg_stat_statements_reset()" >/dev/null
  BENCH_PG_URL="postgres://postgres@127.0.0.1:$PORT/bench" node .bench/dist/bench/run.js --runs 1 --warmup 0 --messages "$MESSAGES" --only "$scenario" --db postgres \
    | grep -E "^$scenario " || die "scenario $scenario printed no result"
  psql_bench -v messages="$MESSAGES" <<'SQL'
SELECT round((total_exec_time * 1000 / :messages)::numeric, 1) AS us_per_event, calls,
       round(shared_blks_hit::numeric / :messages, 1) AS pages_per_event,
       round(wal_bytes / :messages) AS wal_bytes_per_event,
       left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS statement
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'bench') AND total_exec_time * 1000 / :messages >= 0.5
ORDER BY total_exec_time DESC LIMIT 12;
SQL
done
