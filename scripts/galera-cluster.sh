#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster (multi-primary, synchronous) on loopback ports of its own, beside
# the machine's own MariaDB (which this script never touches). Needs Debian's `galera-4` and
# `rsync` (installed here when missing, as root through apt-get).
#
#   scripts/galera-cluster.sh [--port BASE] [--galera-port BASE] [--dir DIR] COMMAND
#
#   start         initialise (first time) and start the nodes that are not running: node 1
#                 bootstraps the cluster when no node runs, the others join it; waits until each
#                 is Synced. A running set is reused.
#   stop          stop every node and delete the data: the next start is a fresh cluster
#   kill N        kill -9 node N's server (a crash; its data stays)
#   restart N     start node N again; it rejoins (IST or SST) and is waited for until Synced
#   status        one line per node: port, running|stopped, wsrep state, cluster size
#   url N         node N's URL; `urls` the multi-host URL of the three (user `ri`, database `ri`)
#   sql N SQL     run SQL as root on node N (through its socket), tab-separated output
#   cert-failures the sum of wsrep_local_cert_failures over the running nodes: local transactions
#                 that failed certification at COMMIT against a write set committed on another node
#   bf-aborts     the sum of wsrep_local_bf_aborts: local transactions aborted while running by a
#                 write set from another node that took their locks (the other way two nodes meet)
#
# Node i listens on BASE+i-1 (default 3311, LOCAL_GALERA_PORT); its group communication on
# GALERA+i-1 (default 4601, LOCAL_GALERA_GCOMM_PORT), its IST on GALERA+10+i-1 and its SST (rsync)
# on GALERA+20+i-1; data under /tmp/rabbit-inbox-galera-BASE (LOCAL_GALERA_DIR). The user `ri`
# (no password, from 127.0.0.1) has the privileges an application has: it cannot write while a
# node is read-only (it lacks READ_ONLY ADMIN), as a real application user.
set -euo pipefail

SET_NAME=galera-cluster
# shellcheck source=scripts/local-set.sh
. "$(dirname "$0")/local-set.sh"

BASE_PORT="${LOCAL_GALERA_PORT:-3311}"
GCOMM_PORT="${LOCAL_GALERA_GCOMM_PORT:-4601}"
DIR="${LOCAL_GALERA_DIR:-}"
parse_options --port=BASE_PORT --galera-port=GCOMM_PORT --dir=DIR -- "$@"
set -- "${ARGS[@]}"
for p in "$BASE_PORT" "$GCOMM_PORT"; do check_port "$p"; done
avoid_port 3306 "$BASE_PORT" 3 MariaDB
DIR="${DIR:-/tmp/rabbit-inbox-galera-$BASE_PORT}"
check_dir "$DIR"
PROVIDER="${LOCAL_GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}"

[ "$(id -u)" = 0 ] || die "run this as root (the servers run as the mysql user)"

install_packages() {
  command -v mariadbd >/dev/null || die "no mariadbd: install mariadb-server"
  [ -e "$PROVIDER" ] && command -v rsync >/dev/null && return 0
  echo "galera-cluster: installing galera-4 and rsync" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends galera-4 rsync >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends galera-4 rsync >/dev/null; } ||
    die "apt-get could not install galera-4 and rsync"
}

port() { echo $((BASE_PORT + $1 - 1)); }
gcomm_port() { echo $((GCOMM_PORT + $1 - 1)); }
node_dir() { echo "$DIR/node$1"; }
cnf() { echo "$DIR/node$1.cnf"; }
sock() { echo "$DIR/node$1.sock"; }
check_node_number() { [[ "${1:-}" =~ ^[123]$ ]] || die "node number must be 1, 2 or 3, got '${1:-}'"; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

server_pid() { # node-number: the pid, only if that process is alive and is this node's mariadbd
  local file="$DIR/node$1.pid" pid
  [ -r "$file" ] || return 1
  pid="$(tr -dc 0-9 < "$file")"
  [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -q -- "--defaults-file=$(cnf "$1")" || return 1
  echo "$pid"
}
running() { server_pid "$1" >/dev/null; }

sql() { # node-number sql
  mariadb --defaults-file=/dev/null --socket="$(sock "$1")" -uroot --batch --skip-column-names -e "$2"
}
status_var() { sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | cut -f2; }

write_config() { # node-number
  local n="$1" members=""
  for i in 1 2 3; do members+="${members:+,}127.0.0.1:$(gcomm_port "$i")"; done
  cat > "$(cnf "$n")" <<EOF
[mysqld]
datadir = $(node_dir "$n")
socket = $(sock "$n")
pid-file = $DIR/node$n.pid
log-error = $DIR/node$n.err
port = $(port "$n")
bind-address = 127.0.0.1
skip-name-resolve
user = mysql
default_storage_engine = InnoDB
binlog_format = ROW
innodb_autoinc_lock_mode = 2
innodb_flush_log_at_trx_commit = 1
innodb_buffer_pool_size = 64M
max_connections = 200
wsrep_on = ON
wsrep_provider = $PROVIDER
wsrep_cluster_name = rabbit-inbox-$BASE_PORT
wsrep_cluster_address = gcomm://$members
wsrep_node_name = g$n
wsrep_node_address = 127.0.0.1:$(gcomm_port "$n")
wsrep_provider_options = "gmcast.listen_addr=tcp://127.0.0.1:$(gcomm_port "$n");ist.recv_addr=127.0.0.1:$((GCOMM_PORT + 10 + n - 1));gcache.size=64M"
wsrep_sst_receive_address = 127.0.0.1:$((GCOMM_PORT + 20 + n - 1))
wsrep_sst_method = rsync
EOF
}

launch() { # node-number [--wsrep-new-cluster]
  local n="$1"; shift
  ! port_open "$(port "$n")" || die "port $(port "$n") (node $n) is already in use by another process"
  write_config "$n"
  if [ ! -d "$(node_dir "$n")/mysql" ]; then
    mariadb-install-db --defaults-file="$(cnf "$n")" --user=mysql --skip-test-db >/dev/null 2>&1 ||
      die "mariadb-install-db failed for node $n"
  fi
  # After a kill -9 the node's state says so (seqno -1): it rejoins by IST or SST.
  setsid mariadbd --defaults-file="$(cnf "$n")" "$@" >/dev/null 2>&1 < /dev/null &
}

await_synced() { # node-number seconds
  local deadline=$((SECONDS + $2)) state=""
  until state="$(status_var "$1" wsrep_local_state_comment)" && [ "$state" = Synced ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "node $1 is not Synced after $2 s (${state:-no answer}); see $DIR/node$1.err"
    sleep 0.5
  done
}

any_running() { local n; for n in 1 2 3; do running "$n" && return 0; done; return 1; }

cmd_start() {
  install_packages
  if [ ! -d "$DIR" ]; then install -d -m 0755 -o mysql -g mysql "$DIR"; fi
  local n first=""
  if ! any_running; then
    # The first node forms a new cluster: only when no node runs at all.
    rm -f "$(node_dir 1)/grastate.dat.bak"
    [ ! -f "$(node_dir 1)/grastate.dat" ] || sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$(node_dir 1)/grastate.dat"
    launch 1 --wsrep-new-cluster
    await_synced 1 120
    sql 1 "CREATE USER IF NOT EXISTS 'ri'@'127.0.0.1';
      GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, REFERENCES, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE,
        CREATE VIEW, SHOW VIEW, TRIGGER, PROCESS ON *.* TO 'ri'@'127.0.0.1';
      CREATE DATABASE IF NOT EXISTS ri" || die "could not create the user ri on node 1"
    first=1
  fi
  for n in 1 2 3; do
    [ "$n" = "$first" ] || running "$n" || launch "$n"
  done
  for n in 1 2 3; do await_synced "$n" 180; done
}

cmd_stop() {
  local n pid pids=()
  for n in 1 2 3; do
    if pid="$(server_pid "$n")"; then kill -TERM "$pid"; pids+=("$pid"); fi
  done
  for pid in "${pids[@]}"; do
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf -- "$DIR"
}

cmd_kill() {
  check_node_number "${1:-}"
  local pid
  pid="$(server_pid "$1")" || die "node $1 is not running"
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

cmd_restart() {
  check_node_number "${1:-}"
  install_packages
  running "$1" || launch "$1"
  await_synced "$1" 180
}

cmd_status() {
  local n all=0
  for n in 1 2 3; do
    if running "$n"; then
      printf 'node%s\t%s\trunning\t%s\tcluster size %s\n' "$n" "$(port "$n")" "$(status_var "$n" wsrep_local_state_comment)" "$(status_var "$n" wsrep_cluster_size)"
    else
      printf 'node%s\t%s\tstopped\n' "$n" "$(port "$n")"; all=3
    fi
  done
  return "$all"
}

status_sum() { # status variable: its sum over the running nodes
  local n total=0 value
  for n in 1 2 3; do
    running "$n" || continue
    value="$(status_var "$n" "$1")"
    total=$((total + ${value:-0}))
  done
  echo "$total"
}

case "$COMMAND" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  kill) cmd_kill "$@" ;;
  restart) cmd_restart "$@" ;;
  status) cmd_status ;;
  url) check_node_number "${1:-}"; echo "mysql://ri@127.0.0.1:$(port "$1")/ri" ;;
  urls) echo "mysql://ri@127.0.0.1:$(port 1),127.0.0.1:$(port 2),127.0.0.1:$(port 3)/ri" ;;
  sql) check_node_number "${1:-}"; n="$1"; shift; sql "$n" "$*" ;;
  cert-failures) status_sum wsrep_local_cert_failures ;;
  bf-aborts) status_sum wsrep_local_bf_aborts ;;
  *) usage ;;
esac
