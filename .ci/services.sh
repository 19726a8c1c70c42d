# Test servers for the store suite: PostgreSQL and Redis on loopback, each on a free port with
# its data in a temporary folder. Sourced by .ci/run, which calls start_services and (on exit,
# also when tests fail) stop_services; `python3 dev.py test` runs it too, for the servers that
# are installed and not given already (see dev.py). A developer can use it by hand:
#
#   source .ci/services.sh && start_services   # exports PAUSEPOINT_TEST_{POSTGRES,REDIS}_URL
#   ...
#   stop_services
#
# `start_services postgres` (or `redis`) starts that one only. It returns non-zero if a server
# did not start, leaving what did start for stop_services.
#
# The Debian packages do not start their servers on install (and we do not want the packaged
# cluster anyway): everything here is private to this run and removed by stop_services.

_pp_free_port() {
  # Ask the kernel for a free port. Another process could take it before the server binds;
  # on loopback in CI that window is harmless.
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

_pp_as_postgres() {
  # initdb and postgres refuse to run as root; drop to the packaged "postgres" user when we are root.
  if [ "$(id -u)" = "0" ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

_pp_start_postgres() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/15/bin 2>/dev/null || ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "services: no PostgreSQL binaries under /usr/lib/postgresql/*/bin (apt-get install postgresql)" >&2
    return 1
  fi
  local dir="$PAUSEPOINT_SERVICES_DIR/postgres"
  mkdir -p "$dir"
  if [ "$(id -u)" = "0" ]; then
    chown postgres:postgres "$dir"
  fi
  _pp_as_postgres "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    return 1
  }
  local port
  port=$(_pp_free_port)
  # Listen on loopback only; the socket lives in our folder, not in /var/run/postgresql.
  _pp_as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c max_connections=200" start >/dev/null || {
    cat "$dir/server.log" >&2
    return 1
  }
  PAUSEPOINT_POSTGRES_PID=$(head -n 1 "$dir/data/postmaster.pid")
  PAUSEPOINT_POSTGRES_DATA="$dir/data"
  "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres pausepoint_test || return 1
  export PAUSEPOINT_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/pausepoint_test"
  echo "services: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (pid $PAUSEPOINT_POSTGRES_PID)"
}

_pp_start_redis() {
  if ! command -v redis-server >/dev/null; then
    echo "services: redis-server not found (apt-get install redis-server)" >&2
    return 1
  fi
  local dir="$PAUSEPOINT_SERVICES_DIR/redis"
  mkdir -p "$dir"
  local port
  port=$(_pp_free_port)
  # No persistence: the tests kill clients, never the server, and a test server needs no disk.
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --pidfile "$dir/redis.pid" \
    --dir "$dir" --logfile "$dir/redis.log" --save '' --appendonly no
  local tries=0
  until redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ]; then
      echo "services: redis-server did not answer on port $port" >&2
      cat "$dir/redis.log" >&2
      return 1
    fi
    sleep 0.1
  done
  PAUSEPOINT_REDIS_PID=$(cat "$dir/redis.pid")
  export PAUSEPOINT_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
  echo "services: $(redis-server --version | awk '{print $1, $3}') on 127.0.0.1:$port (pid $PAUSEPOINT_REDIS_PID)"
}

_pp_stop_pid() {
  # Send a signal to one PID and wait (up to ~30 s) until it is gone.
  local pid=$1 signal=$2 tries=0
  kill "-$signal" "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -gt 300 ]; then
      kill -KILL "$pid" 2>/dev/null || true
      return 0
    fi
    sleep 0.1
  done
}

start_services() {
  PAUSEPOINT_SERVICES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/pausepoint-services.XXXXXX") || return 1
  # The postgres user must be able to reach its data directory inside our folder.
  chmod 755 "$PAUSEPOINT_SERVICES_DIR"
  local name names=("$@")
  [ "${#names[@]}" -gt 0 ] || names=(postgres redis)
  for name in "${names[@]}"; do
    case "$name" in
      postgres) _pp_start_postgres || return 1 ;;
      redis) _pp_start_redis || return 1 ;;
      *) echo "services: no service '$name' (postgres, redis)" >&2; return 1 ;;
    esac
  done
}

stop_services() {
  # Safe to call more than once, and after a start that failed half-way.
  if [ -n "${PAUSEPOINT_REDIS_PID:-}" ]; then
    _pp_stop_pid "$PAUSEPOINT_REDIS_PID" TERM
    echo "services: stopped redis-server (pid $PAUSEPOINT_REDIS_PID)"
  fi
  if [ -n "${PAUSEPOINT_POSTGRES_PID:-}" ]; then
    # SIGINT is PostgreSQL's "fast" shutdown: open sessions are cut, nothing is left to recover.
    _pp_stop_pid "$PAUSEPOINT_POSTGRES_PID" INT
    echo "services: stopped PostgreSQL (pid $PAUSEPOINT_POSTGRES_PID)"
  fi
  if [ -n "${PAUSEPOINT_SERVICES_DIR:-}" ] && [ -d "$PAUSEPOINT_SERVICES_DIR" ]; then
    rm -rf "$PAUSEPOINT_SERVICES_DIR"
  fi
  unset PAUSEPOINT_REDIS_PID PAUSEPOINT_POSTGRES_PID PAUSEPOINT_POSTGRES_DATA PAUSEPOINT_SERVICES_DIR
  unset PAUSEPOINT_TEST_POSTGRES_URL PAUSEPOINT_TEST_REDIS_URL
}
