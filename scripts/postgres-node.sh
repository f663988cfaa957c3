# Shared by scripts/postgres-pair.sh and scripts/patroni-cluster.sh (sourced, not run): PostgreSQL
# 15 servers of one's own, each in a data directory under a set's directory, run as the postgres
# user, listening on 127.0.0.1 only. Callers define die().

PG_BIN="${LOCAL_PG_BIN:-/usr/lib/postgresql/15/bin}"
[ -x "$PG_BIN/postgres" ] || die "no PostgreSQL 15 in $PG_BIN (apt-get install postgresql-15, or set LOCAL_PG_BIN)"

as_postgres() {
  if [ "$(id -un)" = postgres ]; then
    "$@"
  elif [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    sudo -n -u postgres -- "$@" || die "run this as root or as postgres (or allow passwordless sudo -u postgres)"
  fi
}

pg_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

prepare_dir() { # dir: the set's directory, owned by postgres
  if [ ! -d "$1" ]; then
    if [ "$(id -u)" = 0 ]; then install -d -m 0700 -o postgres -g postgres "$1"; else as_postgres mkdir -p -m 0700 "$1"; fi
  fi
  [ "$(stat -c %U "$1")" = postgres ] || die "$1 exists but is not owned by postgres; remove it or choose another --dir"
}

init_node() { # data-dir port socket-dir: initdb with replication allowed from 127.0.0.1
  as_postgres "$PG_BIN/initdb" -D "$1" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  as_postgres sh -c "cat >> '$1/postgresql.conf'" <<EOF
port = $2
listen_addresses = '127.0.0.1'
unix_socket_directories = '$3'
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
wal_log_hints = on
shared_buffers = 32MB
max_connections = 100
EOF
}

postmaster_pid() { # data-dir: the pid, only if that process is alive and is a postgres
  local file="$1/postmaster.pid" pid
  [ -r "$file" ] || return 1
  pid="$(head -n 1 "$file" | tr -dc 0-9)"
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ] || return 1
  echo "$pid"
}
node_running() { postmaster_pid "$1" >/dev/null; }

start_node() { # data-dir port: starts it unless it runs; waits until it accepts connections
  node_running "$1" && return 0
  ! pg_port_open "$2" || die "port $2 is already in use by another process"
  local deadline=$((SECONDS + 60))
  # After a kill -9 its backends may still hold the shared memory for a moment.
  until as_postgres "$PG_BIN/pg_ctl" -D "$1" -l "$1/server.log" -w -t 60 start >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "the server in $1 did not start; see $1/server.log"
    sleep 1
  done
}

stop_node() { # data-dir: fast shutdown, kill -9 after 30 s
  local pid
  pid="$(postmaster_pid "$1")" || return 0
  as_postgres "$PG_BIN/pg_ctl" -D "$1" -m fast -w -t 30 stop >/dev/null 2>&1 || kill -9 "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
}

kill_postmaster() { # data-dir: kill -9, then wait until it is gone
  local pid
  pid="$(postmaster_pid "$1")" || die "no postmaster runs in $1"
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

pg_sql() { # port sql: one value, as postgres, over TCP
  as_postgres "$PG_BIN/psql" -h 127.0.0.1 -p "$1" -U postgres -d postgres -X -q -t -A -c "$2"
}

node_role() { # port
  if [ "$(pg_sql "$1" "SELECT pg_is_in_recovery()" 2>/dev/null)" = t ]; then echo standby; else echo primary; fi
}

wait_for_sync_standby() { # primary-port seconds
  local deadline=$((SECONDS + $2))
  until [ "$(pg_sql "$1" "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'" 2>/dev/null)" = 1 ]; do
    [ "$SECONDS" -lt "$deadline" ] || die "no synchronous standby streams from port $1 after $2 s"
    sleep 0.5
  done
}
