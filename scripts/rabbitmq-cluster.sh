#!/usr/bin/env bash
# Local RabbitMQ nodes for tests and experiments, beside the machine's own broker (which this
# script never touches: its nodes have their own names, ports, config, plugins and data).
#
#   scripts/rabbitmq-cluster.sh [--name PREFIX] [--nodes N] [--port BASE] [--dir DIR] COMMAND
#
#   start        start every node of the set that is not running; nodes 2..N that are not members
#                of node 1's cluster (a fresh set, or one left half-formed) are reset and join
#                it. A running set is reused.
#   stop         stop every node and delete the set's data: the next start is a fresh cluster
#   kill N       kill -9 node N's Erlang VM (a real crash; its data stays)
#   restart N    start node N again and wait until it runs; it rejoins the cluster by itself
#   stop-node N  stop node N cleanly (its data stays)
#   pause N      freeze node N's Erlang VM (SIGSTOP): alive and connected, doing nothing, as a
#                node stalled by its host; the other nodes do not count it out
#   resume N     let a paused node go on (SIGCONT); start resumes paused nodes too
#   status       one line per node (name, running|paused|stopped, AMQP URL, pid) and the cluster
#                as a running node sees it; exit status 0 when every node runs, 3 otherwise
#   running      the names of the nodes whose Erlang VM is alive, one a line (no CLI call: cheap)
#   urls         the nodes' AMQP URLs, comma-separated
#   ctl N ARGS   rabbitmqctl ARGS against node N (e.g. `ctl 1 list_queues name leader members`)
#
# Defaults (flags win over the environment): prefix `c` (LOCAL_CLUSTER_NAME), 3 nodes
# (LOCAL_CLUSTER_NODES), AMQP ports from 5701 (LOCAL_CLUSTER_PORT), data under
# /tmp/rabbit-inbox-rabbitmq-<prefix> (LOCAL_CLUSTER_DIR). Node i is <prefix>i@localhost on AMQP
# port BASE+i-1 and distribution port BASE+i-1+20000; the set's rabbitmqctl calls listen on a
# distribution port from BASE+30000..BASE+30009 (RabbitMQ's default, 35672-35682, is shared by
# every CLI call on the machine). Two sets run side by side when their prefixes differ and their
# base ports are at least max(10, --nodes) apart, e.g. `--name s --nodes 1 --port 5711`.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "rabbitmq-cluster: $*" >&2; exit 1; }

PREFIX="${LOCAL_CLUSTER_NAME:-c}"
NODES="${LOCAL_CLUSTER_NODES:-3}"
BASE_PORT="${LOCAL_CLUSTER_PORT:-5701}"
DIR="${LOCAL_CLUSTER_DIR:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --name) PREFIX="${2:?--name needs a value}"; shift 2 ;;
    --nodes) NODES="${2:?--nodes needs a value}"; shift 2 ;;
    --port) BASE_PORT="${2:?--port needs a value}"; shift 2 ;;
    --dir) DIR="${2:?--dir needs a value}"; shift 2 ;;
    -h|--help) usage ;;
    --*) die "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
COMMAND="$1"; shift

[[ "$PREFIX" =~ ^[a-z][a-z0-9_]*$ ]] || die "--name must be a lowercase Erlang node name prefix, got '$PREFIX'"
# The machine's broker is rabbit@localhost: a prefix of `rabbit` could address it as node "".
[ "$PREFIX" != "rabbit" ] || die "--name rabbit would clash with the system broker's node name"
[[ "$NODES" =~ ^[1-9][0-9]?$ ]] || die "--nodes must be a number from 1 to 99, got '$NODES'"
[[ "$BASE_PORT" =~ ^[1-9][0-9]{3,4}$ ]] && [ "$BASE_PORT" -le 35000 ] || die "--port must be a port from 1000 to 35000, got '$BASE_PORT'"
for ((i = 0; i < NODES; i++)); do
  # 5672/25672 are the system broker's AMQP and distribution ports.
  [ $((BASE_PORT + i)) -ne 5672 ] || die "port 5672 belongs to the system broker; choose another --port"
done
# The distribution ports of this set's CLI calls; 35672-35682 are those of the system broker's.
CTL_PORT_MIN=$((BASE_PORT + 30000))
CTL_PORT_MAX=$((CTL_PORT_MIN + 9))
[ "$CTL_PORT_MAX" -lt 35672 ] || [ "$CTL_PORT_MIN" -gt 35682 ] ||
  die "--port $BASE_PORT would give the CLI ports $CTL_PORT_MIN-$CTL_PORT_MAX, which the system broker's CLI uses; choose another --port"
DIR="${DIR:-/tmp/rabbit-inbox-rabbitmq-$PREFIX}"
case "$DIR" in /*) ;; *) die "--dir must be an absolute path, got '$DIR'" ;; esac

RABBITMQ_USER=rabbitmq
# The rabbitmq user's home holds the Erlang cookie the CLI tools and every node share.
RABBITMQ_USER_HOME="$(getent passwd "$RABBITMQ_USER" | cut -d: -f6)"
[ -n "$RABBITMQ_USER_HOME" ] || die "no '$RABBITMQ_USER' user: is RabbitMQ installed?"
# The distribution's wrappers in /usr/sbin write the system broker's startup log and read its
# env file; the scripts behind them take everything from the environment we pass.
RABBITMQ_BIN="${LOCAL_CLUSTER_RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}"
[ -x "$RABBITMQ_BIN/rabbitmq-server" ] || die "no rabbitmq-server in $RABBITMQ_BIN (set LOCAL_CLUSTER_RABBITMQ_BIN)"

node_name() { echo "$PREFIX$1@localhost"; }
amqp_port() { echo $((BASE_PORT + $1 - 1)); }
dist_port() { echo $((BASE_PORT + $1 - 1 + 20000)); }
node_dir() { echo "$DIR/$PREFIX$1"; }
pid_file() { echo "$(node_dir "$1")/$PREFIX$1.pid"; }
mnesia_dir() { echo "$(node_dir "$1")/mnesia/$(node_name "$1")"; }
url() { echo "amqp://guest:guest@127.0.0.1:$(amqp_port "$1")"; }

check_node_number() {
  [[ "${1:-}" =~ ^[1-9][0-9]*$ ]] && [ "$1" -le "$NODES" ] || die "node number must be 1..$NODES, got '${1:-}'"
}

# Runs a command as the rabbitmq user with a clean environment: nothing of the caller's
# RABBITMQ_* or ERL_* settings leaks into these nodes, and nothing of the system broker's env file.
as_rabbitmq() {
  local env=(env -i "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "HOME=$RABBITMQ_USER_HOME"
    "LANG=C.UTF-8" "LC_ALL=C.UTF-8" "ERL_EPMD_ADDRESS=127.0.0.1" "RABBITMQ_CONF_ENV_FILE=$DIR/rabbitmq-env.conf"
    "RABBITMQ_CTL_DIST_PORT_MIN=$CTL_PORT_MIN" "RABBITMQ_CTL_DIST_PORT_MAX=$CTL_PORT_MAX")
  if [ "$(id -u)" = "$(id -u "$RABBITMQ_USER")" ]; then
    (cd "$RABBITMQ_USER_HOME" && "${env[@]}" "$@")
  elif [ "$(id -u)" = 0 ]; then
    (cd "$RABBITMQ_USER_HOME" && runuser -u "$RABBITMQ_USER" -- "${env[@]}" "$@")
  else
    (cd "$RABBITMQ_USER_HOME" && sudo -n -u "$RABBITMQ_USER" -- "${env[@]}" "$@") ||
      die "run this as root or as '$RABBITMQ_USER' (or allow passwordless sudo -u $RABBITMQ_USER)"
  fi
}

ctl() { # node-number rabbitmqctl-args...
  local n="$1"; shift
  as_rabbitmq "$RABBITMQ_BIN/rabbitmqctl" -n "$(node_name "$n")" "$@"
}

# The pid of node N's Erlang VM, only if that process is alive and really is this node: a stale
# pid file (after kill -9) may name a pid the kernel has since given to another process.
node_pid() {
  local file pid
  file="$(pid_file "$1")"
  [ -r "$file" ] || return 1
  pid="$(tr -dc 0-9 < "$file")"
  [ -n "$pid" ] && [ -r "/proc/$pid/environ" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "beam.smp" ] || return 1
  tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "RABBITMQ_NODENAME=$(node_name "$1")" || return 1
  echo "$pid"
}
is_running() { node_pid "$1" >/dev/null; }
# A node whose VM was frozen with SIGSTOP (state T in /proc/PID/stat, after the command name).
is_paused() {
  local pid
  pid="$(node_pid "$1")" || return 1
  [ "$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" = T ]
}
# Sends a signal to node N's VM (which runs as the rabbitmq user).
signal_node() { # node-number signal
  local pid
  pid="$(node_pid "$1")" || die "$(node_name "$1") is not running"
  if [ "$(id -u)" = 0 ] || [ "$(id -u)" = "$(id -u "$RABBITMQ_USER")" ]; then kill "-$2" "$pid"; else as_rabbitmq kill "-$2" "$pid"; fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

prepare_layout() {
  if [ ! -d "$DIR" ]; then
    if [ "$(id -u)" = 0 ]; then
      install -d -m 0755 -o "$RABBITMQ_USER" -g "$RABBITMQ_USER" "$DIR"
    else
      as_rabbitmq mkdir -p "$DIR"
    fi
  fi
  [ "$(stat -c %U "$DIR")" = "$RABBITMQ_USER" ] || die "$DIR exists but is not owned by $RABBITMQ_USER; remove it or choose another --dir"
  local script="set -e
cd '$DIR'
echo 'ERL_EPMD_ADDRESS=127.0.0.1' > rabbitmq-env.conf
echo '[rabbitmq_consistent_hash_exchange].' > enabled_plugins"
  for ((i = 1; i <= NODES; i++)); do
    script+="
mkdir -p '$(node_dir "$i")/mnesia' '$(node_dir "$i")/log'
printf '%s\\n' 'listeners.tcp.default = 127.0.0.1:$(amqp_port "$i")' 'loopback_users = none' > '$(node_dir "$i")/rabbitmq.conf'"
  done
  # One shell as the rabbitmq user writes everything: each user switch costs a process start.
  as_rabbitmq sh -c "$script"
}

launch() { # node-number: starts the VM detached; the node boots in the background
  local n="$1" port
  for port in "$(amqp_port "$n")" "$(dist_port "$n")"; do
    ! port_open "$port" || die "port $port (for $(node_name "$n")) is already in use by another process"
  done
  as_rabbitmq \
    "RABBITMQ_NODENAME=$(node_name "$n")" \
    "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1" \
    "RABBITMQ_NODE_PORT=$(amqp_port "$n")" \
    "RABBITMQ_DIST_PORT=$(dist_port "$n")" \
    "RABBITMQ_CONFIG_FILE=$(node_dir "$n")/rabbitmq.conf" \
    "RABBITMQ_ADVANCED_CONFIG_FILE=$(node_dir "$n")/advanced.config" \
    "RABBITMQ_ENABLED_PLUGINS_FILE=$DIR/enabled_plugins" \
    "RABBITMQ_MNESIA_BASE=$(node_dir "$n")/mnesia" \
    "RABBITMQ_LOG_BASE=$(node_dir "$n")/log" \
    "RABBITMQ_PID_FILE=$(pid_file "$n")" \
    "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}" \
    "$RABBITMQ_BIN/rabbitmq-server" -detached 9>&-
  # (fd 9 is the set's lock: a detached VM that inherited it would hold the lock for its lifetime)
}

# Waits until node N's rabbit application runs. await_startup gives up at once while the VM has not
# registered its name yet, so this retries until the deadline.
await_node() { # node-number seconds
  local n="$1" deadline=$((SECONDS + $2))
  until ctl "$n" -q await_startup --timeout "$2" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "$(node_name "$n") did not start within $2 s; see $(node_dir "$n")/log"
    is_running "$n" || [ "$SECONDS" -lt $((deadline - $2 + 15)) ] ||
      die "$(node_name "$n") is not running; see $(node_dir "$n")/log"
    sleep 1
  done
}

# The node names an Erlang expression gives as node N evaluates it, one a line.
nodes_seen_by() { # node-number erlang-expression-of-a-node-list
  ctl "$1" -q eval "io:format(\"~s\", [lists:join(\" \", [atom_to_list(M) || M <- $2])])." |
    head -n 1 | sed 's/ok$//' | tr ' ' '\n'
}
# The cluster members node N records (running or not).
members_seen_by() { nodes_seen_by "$1" 'rabbit_mnesia:cluster_nodes(all)'; }

start_nodes() { # node-numbers...: starts those not running; any outside node 1's cluster joins it
  local n launched=() had_data=()
  prepare_layout
  for n in "$@"; do
    [ -d "$(mnesia_dir "$n")" ] && had_data+=("$n")
    is_running "$n" && continue
    launch "$n"
    launched+=("$n")
  done
  for n in "${launched[@]}"; do await_node "$n" 300; done
  # Membership is asked of both sides rather than guessed from a node's data directory: a run
  # killed between a node's first boot and its join leaves a data directory behind, and that node
  # would otherwise come back as a cluster of its own.
  local candidates=()
  for n in "$@"; do [ "$n" = 1 ] || candidates+=("$n"); done
  [ "${#candidates[@]}" -gt 0 ] || return 0
  is_running 1 || die "$(node_name 1) is not running, so $(node_name "${candidates[0]}") cannot be checked or join it; run 'stop' to reset the set"
  local members outsiders=() remembered=()
  members="$(members_seen_by 1)" || die "could not read the cluster members from $(node_name 1)"
  for n in "${candidates[@]}"; do
    if grep -qx "$(node_name "$n")" <<<"$members"; then
      members_seen_by "$n" | grep -qx "$(node_name 1)" && continue
      remembered+=("$n")
    fi
    outsiders+=("$n")
    [[ " ${had_data[*]} " != *" $n "* ]] ||
      echo "rabbitmq-cluster: $(node_name "$n") runs outside $(node_name 1)'s cluster; resetting it and joining" >&2
  done
  [ "${#outsiders[@]}" -gt 0 ] || return 0
  # stop_app, reset and start_app of different nodes run side by side; the forgets and joins one
  # at a time, each a schema change on node 1. The set's nodes are disposable: an outsider's own
  # data goes (force_reset, because peers it remembers may be gone), and node 1 first forgets an
  # outsider it still lists, or the join would be taken as already done.
  in_parallel "${outsiders[@]}" -- -q stop_app
  for n in "${remembered[@]}"; do ctl 1 -q forget_cluster_node "$(node_name "$n")" >/dev/null || die "$(node_name 1) could not forget $(node_name "$n")"; done
  in_parallel "${outsiders[@]}" -- -q force_reset
  for n in "${outsiders[@]}"; do ctl "$n" -q join_cluster "$(node_name 1)" >/dev/null 2>&1 || die "$(node_name "$n") could not join $(node_name 1)"; done
  in_parallel "${outsiders[@]}" -- -q start_app
  for n in "${outsiders[@]}"; do await_node "$n" 300; done
}

in_parallel() { # node-numbers... -- rabbitmqctl-args...: runs the command on each node at once
  local nodes=() pids=() n
  while [ "$1" != "--" ]; do nodes+=("$1"); shift; done
  shift
  for n in "${nodes[@]}"; do ctl "$n" "$@" >/dev/null & pids+=($!); done
  for n in "${pids[@]}"; do wait "$n" || die "rabbitmqctl $* failed on one of nodes ${nodes[*]}"; done
}

lock() {
  # One command at a time per set: two test runs starting the same set must not both launch it.
  exec 9>>"$DIR.lock"
  flock -w 300 9 || die "another rabbitmq-cluster command on $DIR holds $DIR.lock"
}

cmd_start() {
  lock
  local all=()
  for ((i = 1; i <= NODES; i++)); do all+=("$i"); done
  # A run killed between a pause and its resume leaves a frozen node, which every CLI call would wait on.
  for n in "${all[@]}"; do ! is_paused "$n" || signal_node "$n" CONT; done
  start_nodes "${all[@]}"
  cmd_status >/dev/null || die "not every node runs after start; '$0 status' shows which"
}

stop_node() { # node-number: clean stop, kill -9 if it does not stop within 60 s
  local n="$1" pid
  pid="$(node_pid "$n")" || return 0
  ! is_paused "$n" || signal_node "$n" CONT
  ctl "$n" -q stop "$(pid_file "$n")" >/dev/null 2>&1 &
  local stopper=$! deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "rabbitmq-cluster: $(node_name "$n") did not stop within 60 s; killing it" >&2
    kill -9 "$pid"
  fi
  wait "$stopper" 2>/dev/null || true
}

cmd_stop() {
  lock
  local n pids=()
  # In parallel: every node of the set goes, so none has to wait for the others to leave.
  for ((n = 1; n <= NODES; n++)); do stop_node "$n" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid"; done
  for ((n = 1; n <= NODES; n++)); do ! is_running "$n" || die "$(node_name "$n") is still running"; done
  # The set is disposable: the next start forms a fresh cluster instead of waiting for peers
  # that were stopped in another order.
  rm -rf -- "$DIR"
}

cmd_kill() {
  check_node_number "${1:-}"
  lock
  local pid
  pid="$(node_pid "$1")" || die "$(node_name "$1") is not running"
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

cmd_restart() {
  check_node_number "${1:-}"
  lock
  start_nodes "$1"
}

cmd_stop_node() {
  check_node_number "${1:-}"
  lock
  is_running "$1" || die "$(node_name "$1") is not running"
  stop_node "$1"
}

cmd_pause() {
  check_node_number "${1:-}"
  lock
  signal_node "$1" STOP
  until is_paused "$1"; do sleep 0.05; done
}

cmd_resume() {
  check_node_number "${1:-}"
  lock
  signal_node "$1" CONT
  while is_paused "$1"; do sleep 0.05; done
}

cmd_status() {
  local n pid all_running=0 seen_by=""
  for ((n = 1; n <= NODES; n++)); do
    if is_paused "$n"; then
      printf '%s\tpaused\t%s\tpid %s\n' "$(node_name "$n")" "$(url "$n")" "$(node_pid "$n")"
      all_running=3
    elif pid="$(node_pid "$n")"; then
      printf '%s\trunning\t%s\tpid %s\n' "$(node_name "$n")" "$(url "$n")" "$pid"
      [ -n "$seen_by" ] || seen_by="$n"
    else
      printf '%s\tstopped\t%s\n' "$(node_name "$n")" "$(url "$n")"
      all_running=3
    fi
  done
  if [ -n "$seen_by" ] && [ "$NODES" -gt 1 ]; then
    local running
    running="$(nodes_seen_by "$seen_by" 'rabbit_nodes:all_running()' 2>/dev/null | paste -sd,)" || running="?"
    printf 'cluster\trunning nodes seen by %s: %s\n' "$(node_name "$seen_by")" "$running"
  fi
  return "$all_running"
}

cmd_running() {
  local n
  for ((n = 1; n <= NODES; n++)); do ! is_running "$n" || node_name "$n"; done
}

cmd_urls() {
  local n out=""
  for ((n = 1; n <= NODES; n++)); do out+="${out:+,}$(url "$n")"; done
  echo "$out"
}

case "$COMMAND" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  kill) cmd_kill "$@" ;;
  restart) cmd_restart "$@" ;;
  stop-node) cmd_stop_node "$@" ;;
  pause) cmd_pause "$@" ;;
  resume) cmd_resume "$@" ;;
  status) cmd_status ;;
  running) cmd_running ;;
  urls) cmd_urls ;;
  ctl) check_node_number "${1:-}"; n="$1"; shift; ctl "$n" "$@" ;;
  *) usage ;;
esac
