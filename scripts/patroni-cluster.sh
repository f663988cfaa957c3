#!/usr/bin/env bash
# Three PostgreSQL 15 nodes managed by Patroni (synchronous_mode: true) with a one-member etcd as
# its store, all on loopback ports of their own, beside the machine's own server (never touched).
# Installs Debian's `patroni` and `etcd-server` when they are missing (as root, through apt-get).
#
#   scripts/patroni-cluster.sh [--port BASE] [--rest-port BASE] [--etcd-port PORT] [--dir DIR] COMMAND
#
#   start         start etcd and the three Patroni nodes (a running set is reused); waits until
#                 there is a leader, a synchronous standby and all three stream
#   stop          stop everything and delete the data: the next start is a fresh cluster
#   wait          wait until the cluster is healthy again (leader, sync standby, three running)
#   leader        the number of the node that is leader now
#   kill-leader   kill -9 the leader's postmaster (Patroni itself stays up); prints its number.
#                 Patroni promotes the synchronous standby (primary_start_timeout: 0) and brings
#                 the old leader back as a replica
#   kill N        kill -9 node N's postmaster
#   status        patronictl list; exit status 0 only when the cluster is healthy (3 otherwise)
#   url N         node N's URL; `urls` the libpq multi-host URL of the three (read-write)
#   psql N ARGS   psql as postgres against node N
#
# Node i: PostgreSQL on BASE+i-1 (default 5443, LOCAL_PATRONI_PORT), Patroni REST on
# REST+i-1 (default 8008, LOCAL_PATRONI_REST_PORT); etcd client port 23790 and peer port
# +1 (LOCAL_PATRONI_ETCD_PORT); data under /tmp/rabbit-inbox-patroni-BASE (LOCAL_PATRONI_DIR).
# Trust authentication on 127.0.0.1 only, user postgres, database `postgres`.
set -euo pipefail

SET_NAME=patroni-cluster
# shellcheck source=scripts/local-set.sh
. "$(dirname "$0")/local-set.sh"

BASE_PORT="${LOCAL_PATRONI_PORT:-5443}"
REST_PORT="${LOCAL_PATRONI_REST_PORT:-8008}"
ETCD_PORT="${LOCAL_PATRONI_ETCD_PORT:-23790}"
DIR="${LOCAL_PATRONI_DIR:-}"
parse_options --port=BASE_PORT --rest-port=REST_PORT --etcd-port=ETCD_PORT --dir=DIR -- "$@"
set -- "${ARGS[@]}"
for p in "$BASE_PORT" "$REST_PORT" "$ETCD_PORT"; do check_port "$p"; done
avoid_port 5432 "$BASE_PORT" 3 PostgreSQL
DIR="${DIR:-/tmp/rabbit-inbox-patroni-$BASE_PORT}"
check_dir "$DIR"
SCOPE="rabbit-inbox-$BASE_PORT"

install_packages() {
  command -v patroni >/dev/null && command -v etcd >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "patroni and etcd are not installed: run as root once (apt-get install patroni etcd-server)"
  echo "patroni-cluster: installing patroni and etcd-server" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends patroni etcd-server >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends patroni etcd-server >/dev/null; } ||
    die "apt-get could not install patroni and etcd-server"
}

# shellcheck source=scripts/postgres-node.sh
. "$(dirname "$0")/postgres-node.sh"

pg_port() { echo $((BASE_PORT + $1 - 1)); }
rest_port() { echo $((REST_PORT + $1 - 1)); }
node_dir() { echo "$DIR/pg$1"; }
check_node_number() { [[ "${1:-}" =~ ^[123]$ ]] || die "node number must be 1, 2 or 3, got '${1:-}'"; }

alive() { # pid-file command-name: the pid, if that process runs that command
  local pid
  [ -r "$1" ] || return 1
  pid="$(tr -dc 0-9 < "$1")"
  [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -q -- "$2" || return 1
  echo "$pid"
}

start_etcd() {
  alive "$DIR/etcd.pid" "etcd --name" >/dev/null && return 0
  ! pg_port_open "$ETCD_PORT" || die "port $ETCD_PORT (etcd) is already in use by another process"
  as_postgres sh -c "cd '$DIR' && nohup setsid etcd --name '$SCOPE' --data-dir '$DIR/etcd' \
    --listen-client-urls http://127.0.0.1:$ETCD_PORT --advertise-client-urls http://127.0.0.1:$ETCD_PORT \
    --listen-peer-urls http://127.0.0.1:$((ETCD_PORT + 1)) --initial-advertise-peer-urls http://127.0.0.1:$((ETCD_PORT + 1)) \
    --initial-cluster '$SCOPE=http://127.0.0.1:$((ETCD_PORT + 1))' --listen-metrics-urls '' \
    > '$DIR/etcd.log' 2>&1 < /dev/null & echo \$! > '$DIR/etcd.pid'"
  local deadline=$((SECONDS + 30))
  until curl -fsS "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "etcd did not start; see $DIR/etcd.log"
    sleep 0.3
  done
}

write_config() { # node-number
  local n="$1"
  as_postgres sh -c "cat > '$DIR/pg$n.yml'" <<EOF
scope: $SCOPE
namespace: /rabbit-inbox/
name: pg$n
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:$(rest_port "$n")
  connect_address: 127.0.0.1:$(rest_port "$n")
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    # A crashed primary is not restarted in place: the synchronous standby takes over at once.
    master_start_timeout: 0
    primary_start_timeout: 0
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 100
        shared_buffers: 32MB
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
  pg_hba:
    - host replication all 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: 127.0.0.1:$(pg_port "$n")
  data_dir: $(node_dir "$n")
  bin_dir: $PG_BIN
  pgpass: $DIR/pgpass$n
  authentication:
    superuser: {username: postgres}
    replication: {username: postgres}
    rewind: {username: postgres}
  parameters:
    unix_socket_directories: '$DIR'
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
}

start_patroni() { # node-number
  local n="$1"
  alive "$DIR/patroni$n.pid" "patroni $DIR/pg$n.yml" >/dev/null && return 0
  for p in "$(pg_port "$n")" "$(rest_port "$n")"; do ! pg_port_open "$p" || die "port $p (node $n) is already in use by another process"; done
  write_config "$n"
  as_postgres sh -c "cd '$DIR' && nohup setsid patroni '$DIR/pg$n.yml' > '$DIR/patroni$n.log' 2>&1 < /dev/null & echo \$! > '$DIR/patroni$n.pid'"
}

# The members as the REST API of any running node sees them: "name role state lag" lines.
members() {
  local n
  for n in 1 2 3; do
    curl -fsS "http://127.0.0.1:$(rest_port "$n")/cluster" 2>/dev/null |
      jq -r '.members[] | "\(.name) \(.role) \(.state) \(.lag // 0)"' 2>/dev/null && return 0
  done
  return 1
}

cmd_wait() { # seconds
  local deadline=$((SECONDS + ${1:-120})) seen=""
  until seen="$(members)" && [ "$(grep -c -E ' (leader|sync_standby|replica) (running|streaming)' <<<"$seen")" = 3 ] &&
      grep -q ' leader running' <<<"$seen" && grep -qE ' sync_standby (running|streaming)' <<<"$seen" &&
      [ "$(pg_sql "$(pg_port "$(leader_number <<<"$seen")")" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null)" = 2 ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "the cluster is not healthy after ${1:-120} s: ${seen:-no member answers}; see $DIR/patroni*.log"
    sleep 1
  done
}

leader_number() { sed -n 's/^pg\([123]\) leader .*/\1/p' | head -n 1; }

cmd_leader() {
  local n
  n="$(members | leader_number)" || true
  [ -n "$n" ] || die "no leader now"
  echo "$n"
}

cmd_start() {
  install_packages
  prepare_dir "$DIR"
  start_etcd
  start_patroni 1
  # On a fresh set the first node bootstraps alone and the others then clone it; a set already
  # formed has a leader, whichever node it is.
  local deadline=$((SECONDS + 90))
  until members 2>/dev/null | grep -q ' leader running'; do
    [ "$SECONDS" -lt "$deadline" ] || die "no node became leader; see $DIR/patroni1.log"
    sleep 1
  done
  start_patroni 2
  start_patroni 3
  cmd_wait 120
}

cmd_stop() {
  local n pid
  for n in 1 2 3; do
    if pid="$(alive "$DIR/patroni$n.pid" "patroni $DIR/pg$n.yml")"; then kill -TERM "$pid"; fi
  done
  for n in 1 2 3; do
    if pid="$(alive "$DIR/patroni$n.pid" "patroni $DIR/pg$n.yml")"; then
      local deadline=$((SECONDS + 30))
      while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    [ -d "$(node_dir "$n")" ] && stop_node "$(node_dir "$n")"
  done
  if pid="$(alive "$DIR/etcd.pid" "etcd --name")"; then kill -TERM "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done; fi
  rm -rf -- "$DIR"
}

cmd_kill() { # node-number: its postmaster, not Patroni
  check_node_number "${1:-}"
  kill_postmaster "$(node_dir "$1")"
}

case "$COMMAND" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  wait) cmd_wait "${1:-120}" ;;
  leader) cmd_leader ;;
  kill-leader) n="$(cmd_leader)"; cmd_kill "$n"; echo "$n" ;;
  kill) cmd_kill "$@" ;;
  status) patronictl -c "$DIR/pg1.yml" list 2>/dev/null || true; ( cmd_wait 1 ) 2>/dev/null || exit 3 ;;
  url) check_node_number "${1:-}"; echo "postgres://postgres@127.0.0.1:$(pg_port "$1")/postgres" ;;
  urls) echo "postgres://postgres@127.0.0.1:$(pg_port 1),127.0.0.1:$(pg_port 2),127.0.0.1:$(pg_port 3)/postgres?target_session_attrs=read-write" ;;
  psql) check_node_number "${1:-}"; n="$1"; shift; as_postgres "$PG_BIN/psql" -h 127.0.0.1 -p "$(pg_port "$n")" -U postgres -X -q "$@" ;;
  *) usage ;;
esac
