#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the PostgreSQL store's tests: `initdb` into a fresh temp dir, trust
# auth for the user `agentic`, listening on a free loopback port (and a unix socket in the same dir).
#
#   eval "$(scripts/pg-test-server.sh start)"   # exports AGENTIC_TEST_PG_URL, AGENTIC_TEST_PG_DIR and _CA
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
# measure with it), max_connections=200 (tests run in parallel, each with its own pool). TLS is on (ssl=on,
# a certificate for 127.0.0.1 signed by a test authority made with `openssl`, whose certificate is exported
# as AGENTIC_TEST_PG_CA); the role `agentic_tls` (which a test creates) may connect over TCP only with TLS.
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
  # TLS: a test authority (ca.crt, the tests' `sslrootcert`) and the server's certificate it signed, for
  # 127.0.0.1 and localhost; the role `agentic_tls` may connect over TCP only with TLS (the first matching
  # line of pg_hba.conf wins).
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >"$dir/server.ext"
  { openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=agentic test authority" \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" \
    && openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$dir/data/server.key" -out "$dir/server.csr" \
    && openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
      -days 2 -extfile "$dir/server.ext" -out "$dir/data/server.crt"; } >"$dir/openssl.log" 2>&1 \
    || { cat "$dir/openssl.log" >&2; die "openssl could not make the test certificates (log above)"; }
  chmod 600 "$dir/data/server.key"
  chmod 644 "$dir/ca.crt"
  [ "$(id -u)" -ne 0 ] || chown "$OWNER" "$dir/data/server.key" "$dir/data/server.crt"
  { printf 'hostnossl all agentic_tls 127.0.0.1/32 reject\n'; cat "$dir/data/pg_hba.conf"; } >"$dir/pg_hba.new"
  as_owner cp "$dir/pg_hba.new" "$dir/data/pg_hba.conf"
  log="$dir/server.log"
  for tries in 1 2 3 4 5 6 7 8; do
    port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 30000 ))
    port_in_use "$port" && continue
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$log" -w -t 30 start -o \
        "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=${PG_TEST_FSYNC:-off} -c max_connections=200 -c ssl=on" \
        >/dev/null 2>&1; then
      echo "pg-test-server: PostgreSQL ($("$bin/postgres" --version)) on 127.0.0.1:$port, dir $dir, owner $OWNER" >&2
      echo "export AGENTIC_TEST_PG_URL='postgres://agentic@127.0.0.1:$port/postgres'"
      echo "export AGENTIC_TEST_PG_DIR='$dir'"
      echo "export AGENTIC_TEST_PG_CA='$dir/ca.crt'"
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
