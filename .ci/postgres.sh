#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests, in a temporary folder, on a free loopback port.
#
#   eval "$(.ci/postgres.sh start)"   # prints the exports: RUNAI_RECONCILE_TEST_PG (the URL,
#                                     # with a random password) and RUNAI_RECONCILE_TEST_PG_DIR
#   .ci/postgres.sh restart           # restarts it, same port and data (a test of a server restart)
#   .ci/postgres.sh stop              # stops it and removes the folder ($RUNAI_RECONCILE_TEST_PG_DIR)
#
# Needs the PostgreSQL server binaries (Debian: apt-get install postgresql). As root the
# server runs as the `postgres` user (initdb refuses root).
set -euo pipefail

bindir() {
  local d
  if command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir
    return
  fi
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then
    echo "$d"
    return
  fi
  d=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
  [ -x "$d/initdb" ] || { echo "postgres.sh: no initdb found (install postgresql)" >&2; exit 1; }
  echo "$d"
}

as_owner() {  # run "$1" as the folder's owner: postgres when we are root
  if [ "$(id -u)" = 0 ]; then
    su postgres -s /bin/sh -c "$1"
  else
    sh -c "$1"
  fi
}

start() {
  local dir bin port password
  bin=$(bindir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/runai-reconcile-pg.XXXXXX")
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  printf '%s\n' "$password" > "$dir/pwfile"
  [ "$(id -u)" = 0 ] && chown -R postgres "$dir"
  chmod 700 "$dir"
  as_owner "'$bin/initdb' -D '$dir/data' -U postgres --pwfile='$dir/pwfile' --auth-local=trust \
    --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >'$dir/initdb.log' 2>&1" \
    || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; exit 1; }
  rm -f "$dir/pwfile"
  # fsync off: a throwaway cluster for tests (a client's kill -9 is tested, not the server's)
  as_owner "'$bin/pg_ctl' -D '$dir/data' -l '$dir/server.log' -w -t 60 start \
    -o \"-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$dir' -c fsync=off\" \
    >/dev/null" || { cat "$dir/server.log" >&2; rm -rf "$dir"; exit 1; }
  echo "export RUNAI_RECONCILE_TEST_PG=postgresql://postgres:$password@127.0.0.1:$port/postgres"
  echo "export RUNAI_RECONCILE_TEST_PG_DIR=$dir"
}

stop() {
  local dir=${1:-${RUNAI_RECONCILE_TEST_PG_DIR:-}} bin
  [ -n "$dir" ] && [ -d "$dir/data" ] || { echo "postgres.sh: no server folder to stop" >&2; exit 1; }
  bin=$(bindir)
  as_owner "'$bin/pg_ctl' -D '$dir/data' -m fast -w stop >/dev/null" || true
  rm -rf "$dir"
}

restart() {
  local dir=${1:-${RUNAI_RECONCILE_TEST_PG_DIR:-}} bin
  [ -n "$dir" ] && [ -d "$dir/data" ] || { echo "postgres.sh: no server folder to restart" >&2; exit 1; }
  bin=$(bindir)
  as_owner "'$bin/pg_ctl' -D '$dir/data' -l '$dir/server.log' -m fast -w -t 60 restart >/dev/null"
}

case "${1:-}" in
  start) start ;;
  stop) shift; stop "$@" ;;
  restart) shift; restart "$@" ;;
  *) echo "usage: $0 start | restart [DIR] | stop [DIR]" >&2; exit 1 ;;
esac
