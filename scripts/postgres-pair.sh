#!/usr/bin/env bash
# A PostgreSQL 15 primary with a synchronous standby (streaming replication) on loopback ports of
# their own, beside the machine's own server (which this script never touches), for failover
# tests and drills.
#
#   scripts/postgres-pair.sh [--port BASE] [--dir DIR] COMMAND
#
#   start        initialise (first time) and start both nodes; the standby is a base backup of
#                the primary, and every commit on the primary waits for it (synchronous_commit =
#                on, synchronous_standby_names = '*'). A running pair is reused.
#   stop         stop both nodes and delete their data: the next start is a fresh pair
#   kill N       kill -9 node N's postmaster (a crash: its sessions die, its data stays)
#   promote N    promote standby N to primary, alone: its synchronous_standby_names is cleared
#                first, or every commit would wait for a standby it does not have
#   restart N    start node N again (its data as it was)
#   status       one line per node: port, running|stopped, primary|standby; exit status 0 only
#                when both run, one the primary and the other its standby (3 otherwise)
#   url N        node N's URL; `urls` the libpq multi-host URL of both, read-write first found
#   psql N ARGS  psql as postgres against node N
#
# Node 1 listens on BASE (default 5441, LOCAL_PG_PAIR_PORT), node 2 on BASE+1; data under
# /tmp/rabbit-inbox-pg-pair-BASE (LOCAL_PG_PAIR_DIR). Trust authentication on 127.0.0.1 only, user
# postgres, database `postgres`. Runs as root (the servers run as the postgres user) or as postgres.
set -euo pipefail

SET_NAME=postgres-pair
# shellcheck source=scripts/local-set.sh
. "$(dirname "$0")/local-set.sh"

BASE_PORT="${LOCAL_PG_PAIR_PORT:-5441}"
DIR="${LOCAL_PG_PAIR_DIR:-}"
parse_options --port=BASE_PORT --dir=DIR -- "$@"
set -- "${ARGS[@]}"
check_port "$BASE_PORT"
avoid_port 5432 "$BASE_PORT" 2 PostgreSQL
DIR="${DIR:-/tmp/rabbit-inbox-pg-pair-$BASE_PORT}"
check_dir "$DIR"

# shellcheck source=scripts/postgres-node.sh
. "$(dirname "$0")/postgres-node.sh"

node_port() { echo $((BASE_PORT + $1 - 1)); }
node_dir() { echo "$DIR/node$1"; }
check_node_number() { [[ "${1:-}" =~ ^[12]$ ]] || die "node number must be 1 or 2, got '${1:-}'"; }

cmd_start() {
  prepare_dir "$DIR"
  if [ ! -f "$(node_dir 1)/PG_VERSION" ]; then
    init_node "$(node_dir 1)" "$(node_port 1)" "$DIR"
    as_postgres sh -c "cat >> '$(node_dir 1)/postgresql.conf'" <<EOF
synchronous_standby_names = '*'
synchronous_commit = on
EOF
  fi
  start_node "$(node_dir 1)" "$(node_port 1)"
  if [ ! -f "$(node_dir 2)/PG_VERSION" ]; then
    as_postgres "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$(node_port 1)" -U postgres -D "$(node_dir 2)" -R -X stream -c fast >/dev/null
    as_postgres sh -c "cat >> '$(node_dir 2)/postgresql.conf'" <<EOF
port = $(node_port 2)
EOF
  fi
  start_node "$(node_dir 2)" "$(node_port 2)"
  wait_for_sync_standby "$(node_port 1)" 60
}

cmd_stop() {
  local n
  for n in 1 2; do stop_node "$(node_dir "$n")"; done
  rm -rf -- "$DIR"
}

cmd_promote() {
  check_node_number "${1:-}"
  local dir; dir="$(node_dir "$1")"
  # Promoted alone, a copy of the primary's settings would wait forever for a standby.
  as_postgres sh -c "echo \"synchronous_standby_names = ''\" >> '$dir/postgresql.conf'"
  as_postgres "$PG_BIN/pg_ctl" -D "$dir" reload >/dev/null
  as_postgres "$PG_BIN/pg_ctl" -D "$dir" promote -w >/dev/null
}

cmd_status() {
  local n all=0 roles=""
  for n in 1 2; do
    if node_running "$(node_dir "$n")"; then
      local role; role="$(node_role "$(node_port "$n")")"
      roles+="$role "
      printf 'node%s\t%s\trunning\t%s\n' "$n" "$(node_port "$n")" "$role"
    else
      printf 'node%s\t%s\tstopped\n' "$n" "$(node_port "$n")"; all=3
    fi
  done
  # Two primaries (a standby promoted while the old primary came back) is not a pair.
  [[ "$roles" == *primary* && "$roles" == *standby* ]] || all=3
  return "$all"
}

case "$COMMAND" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  kill) check_node_number "${1:-}"; kill_postmaster "$(node_dir "$1")" ;;
  promote) cmd_promote "$@" ;;
  restart) check_node_number "${1:-}"; start_node "$(node_dir "$1")" "$(node_port "$1")" ;;
  status) cmd_status ;;
  url) check_node_number "${1:-}"; echo "postgres://postgres@127.0.0.1:$(node_port "$1")/postgres" ;;
  urls) echo "postgres://postgres@127.0.0.1:$(node_port 1),127.0.0.1:$(node_port 2)/postgres?target_session_attrs=read-write" ;;
  psql) check_node_number "${1:-}"; n="$1"; shift; as_postgres "$PG_BIN/psql" -h 127.0.0.1 -p "$(node_port "$n")" -U postgres -X -q "$@" ;;
  *) usage ;;
esac
