#!/usr/bin/env bash
# A throwaway PostgreSQL for the test suite: start | stop | url | status.
#
#   bash .ci/postgres.sh start    # initdb in a fresh temp dir, start on a free 127.0.0.1 port,
#                                 # create database phalanx_test (installs PostgreSQL if missing)
#   bash .ci/postgres.sh url      # postgresql+psycopg://postgres@127.0.0.1:PORT/phalanx_test
#   bash .ci/postgres.sh stop     # stop that server by its postmaster pid, delete its dir
#
# State (pid, port, dir) lives in $PHALANX_PG_STATE, by default a file in /tmp named after this
# checkout, so two checkouts on one machine get two servers. Trust auth on loopback only.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${PHALANX_PG_STATE:-/tmp/phalanx-pg-$(printf '%s' "$REPO" | sha256sum | cut -c1-12).state}"
DB_NAME=phalanx_test

die() { echo "postgres.sh: $*" >&2; exit 1; }

find_bin() {
  if [[ -n "${PG_BIN:-}" ]]; then echo "$PG_BIN"; return; fi
  if [[ -x /usr/lib/postgresql/15/bin/postgres ]]; then echo /usr/lib/postgresql/15/bin; return; fi
  local newest
  newest="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [[ -n "$newest" && -x "$newest/postgres" ]] && echo "$newest"
}

install_postgres() {
  [[ "$(id -u)" -eq 0 ]] || die "PostgreSQL is not installed and installing it needs root"
  echo "postgres.sh: installing Debian's postgresql package" >&2
  export DEBIAN_FRONTEND=noninteractive
  # No default cluster: nothing may be left running on port 5432 after the tests.
  mkdir -p /etc/postgresql-common
  [[ -f /etc/postgresql-common/createcluster.conf ]] \
    || echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
  apt-get update -qq
  apt-get install -y -qq -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    postgresql >/dev/null
}

# Run a command as the postgres user when we are root (initdb refuses root), else as ourselves.
as_pg() {
  if [[ "$(id -u)" -eq 0 ]]; then
    su postgres -s /bin/sh -c "cd / && $*"
  else
    sh -c "$*"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

load_state() {
  [[ -f "$STATE" ]] || die "not running (no state file $STATE); run: bash .ci/postgres.sh start"
  # shellcheck disable=SC1090
  source "$STATE"
}

is_alive() {
  [[ -n "${PG_PID:-}" ]] && kill -0 "$PG_PID" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$PG_PID/cmdline" 2>/dev/null | grep -q postgres
}

start() {
  if [[ -f "$STATE" ]]; then
    # shellcheck disable=SC1090
    source "$STATE"
    is_alive && die "already running (pid $PG_PID, port $PG_PORT); run stop first"
    rm -rf "${PG_DIR:?}" "$STATE"
  fi
  local bin
  bin="$(find_bin || true)"
  if [[ -z "$bin" ]]; then
    install_postgres
    bin="$(find_bin || true)"
    [[ -n "$bin" ]] || die "no PostgreSQL binaries under /usr/lib/postgresql after installing"
  fi

  local dir port attempt
  dir="$(mktemp -d /tmp/phalanx-pg.XXXXXX)"
  chmod 755 "$dir"
  if [[ "$(id -u)" -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "user postgres missing; reinstall the postgresql package"
    chown postgres: "$dir"
  fi
  as_pg "'$bin/initdb' -D '$dir/data' -U postgres -A trust -E UTF8 --locale=C >'$dir/initdb.log' 2>&1" \
    || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; die "initdb failed"; }

  for attempt in 1 2 3; do
    port="$(free_port)"
    if as_pg "'$bin/pg_ctl' -D '$dir/data' -l '$dir/server.log' -w -t 60 start -o \
        \"-p $port -k '$dir' -c listen_addresses=127.0.0.1 -c fsync=off \
          -c synchronous_commit=off -c full_page_writes=off -c max_connections=200\"" >/dev/null
    then
      break
    fi
    [[ "$attempt" -eq 3 ]] && { cat "$dir/server.log" >&2; rm -rf "$dir"; die "server did not start"; }
  done

  local pid
  pid="$(head -n 1 "$dir/data/postmaster.pid")"
  printf 'PG_PID=%s\nPG_PORT=%s\nPG_DIR=%s\nPG_BINDIR=%s\n' "$pid" "$port" "$dir" "$bin" >"$STATE"

  for _ in $(seq 1 60); do
    "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" && break
    sleep 0.5
  done
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" || { stop; die "server not ready on port $port"; }
  "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$DB_NAME"
  echo "postgres.sh: PostgreSQL pid $pid on 127.0.0.1:$port, data in $dir" >&2
}

stop() {
  load_state
  if is_alive; then
    as_pg "'$PG_BINDIR/pg_ctl' -D '$PG_DIR/data' -m fast -w -t 30 stop" >/dev/null 2>&1 || true
    if is_alive; then
      kill -TERM "$PG_PID" 2>/dev/null || true
      for _ in $(seq 1 40); do is_alive || break; sleep 0.25; done
      is_alive && die "postmaster $PG_PID did not stop; data left in $PG_DIR"
    fi
  fi
  rm -rf "${PG_DIR:?}" "$STATE"
  echo "postgres.sh: stopped PostgreSQL pid $PG_PID" >&2
}

url() {
  load_state
  is_alive || die "state file says pid $PG_PID but it is not running; run stop, then start"
  echo "postgresql+psycopg://postgres@127.0.0.1:$PG_PORT/$DB_NAME"
}

status() {
  load_state
  if is_alive; then echo "running: pid $PG_PID port $PG_PORT dir $PG_DIR"; else echo "dead: pid $PG_PID"; exit 1; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) url ;;
  status) status ;;
  *) die "usage: $0 start|stop|url|status" ;;
esac
