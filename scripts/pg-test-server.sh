#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the PostgreSQL store's tests: `initdb` into a fresh temp dir, trust
# auth for the user `agentic`, listening on a free loopback port (and a unix socket in the same dir).
#
#   eval "$(scripts/pg-test-server.sh start)"   # exports AGENTIC_TEST_PG_URL and AGENTIC_TEST_PG_DIR
#   cargo test -p agentic-store --features postgres
#   scripts/pg-test-server.sh stop "$AGENTIC_TEST_PG_DIR"   # stops the server and deletes the dir
#
# `start` prints the two `export` lines on stdout (everything else goes to stderr). The tests create a
# database of their own per test in this cluster; nothing is kept: the cluster is gone after `stop`.
#
# The binaries: `initdb`, `pg_ctl` from $PG_BIN if set, else from PATH, else the newest
# /usr/lib/postgresql/*/bin (Debian's `postgresql` package). initdb refuses to run as root: as root the
# cluster is created and run as the user `postgres` (Debian's package creates it) or else `nobody`, through
# `runuser -u USER --`, and the temp dir is given to that user.
#
# Settings for tests, not for data: fsync=off (a test never survives a power loss; set PG_TEST_FSYNC=on to
# measure with it), max_connections=200 (tests run in parallel, each with its own pool).
set -euo pipefail

die() { echo "pg-test-server: $*" >&2; exit 1; }

find_bin() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return
  fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$dir" ] || die "no initdb/pg_ctl found (install PostgreSQL, e.g. apt-get install -y postgresql, or set PG_BIN)"
  echo "$dir"
}

# Runs "$@" as the cluster's owner: ourselves, or (as root) the user `postgres` or `nobody`.
as_owner() {
  if [ "$(id -u)" -ne 0 ]; then "$@"; else runuser -u "$OWNER" -- "$@"; fi
}

owner() {
  if [ "$(id -u)" -ne 0 ]; then id -un; elif id postgres >/dev/null 2>&1; then echo postgres; else echo nobody; fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  local bin dir port log tries
  bin=$(find_bin)
  OWNER=$(owner)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/agentic-pg.XXXXXX")
  chmod 755 "$dir"
  [ "$(id -u)" -ne 0 ] || chown "$OWNER" "$dir"
  as_owner "$bin/initdb" -D "$dir/data" -U agentic --auth=trust --encoding=UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb failed (log above)"; }
  log="$dir/server.log"
  for tries in 1 2 3 4 5 6 7 8; do
    port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 30000 ))
    port_in_use "$port" && continue
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$log" -w -t 30 start -o \
        "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=${PG_TEST_FSYNC:-off} -c max_connections=200" \
        >/dev/null 2>&1; then
      echo "pg-test-server: PostgreSQL ($("$bin/postgres" --version)) on 127.0.0.1:$port, dir $dir, owner $OWNER" >&2
      echo "export AGENTIC_TEST_PG_URL='postgres://agentic@127.0.0.1:$port/postgres'"
      echo "export AGENTIC_TEST_PG_DIR='$dir'"
      return
    fi
  done
  cat "$log" >&2 || true
  die "could not start the server after $tries tries (log above)"
}

stop() {
  local dir=${1:-${AGENTIC_TEST_PG_DIR:-}}
  [ -n "$dir" ] && [ -d "$dir/data" ] || die "stop: give the dir that start printed (AGENTIC_TEST_PG_DIR)"
  local bin
  bin=$(find_bin)
  OWNER=$(stat -c %U "$dir/data")
  as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) die "usage: $0 start | stop DIR" ;;
esac
