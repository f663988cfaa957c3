# Shared by scripts/postgres-pair.sh, patroni-cluster.sh and galera-cluster.sh (sourced, not run):
# the command line of a set of local servers. The caller sets SET_NAME (for messages) first.

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "$SET_NAME: $*" >&2; exit 1; }

# parse_options --opt=VARIABLE ... -- "$@": each --opt VALUE sets VARIABLE; then COMMAND and ARGS.
parse_options() {
  local specs=() spec found
  while [ "$1" != "--" ]; do specs+=("$1"); shift; done
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      -h|--help) usage ;;
      --*)
        found=""
        for spec in "${specs[@]}"; do
          if [ "${spec%%=*}" = "$1" ]; then
            [ $# -ge 2 ] || die "$1 needs a value"
            printf -v "${spec#*=}" '%s' "$2"; found=1
          fi
        done
        [ -n "$found" ] || die "unknown option $1"
        shift 2 ;;
      *) break ;;
    esac
  done
  [ $# -ge 1 ] || usage
  COMMAND="$1"; shift
  ARGS=("$@")
}

check_port() { # value: a port this set may take
  [[ "$1" =~ ^[1-9][0-9]{3,4}$ ]] && [ "$1" -le 65000 ] || die "ports must be from 1000 to 65000, got '$1'"
}

avoid_port() { # reserved-port base count what: none of base..base+count-1 is the machine's own server
  local i
  for ((i = 0; i < $3; i++)); do [ $(($2 + i)) -ne "$1" ] || die "port $1 belongs to the machine's $4; choose another --port"; done
}

check_dir() { # dir
  case "$1" in /*) ;; *) die "--dir must be an absolute path, got '$1'" ;; esac
}
