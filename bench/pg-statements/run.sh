#!/usr/bin/env bash
# The PostgreSQL store's step statements timed alone at the server (docs/performance.md, "Where a sync step's
# time goes"): pgbench, one connection, prepared statements with parameters, each for 8 s, the set three times.
# Usage: bench/pg-statements/run.sh postgres://user@host:port/db   (a database it may create tables in; fsync
# on for a durable commit, e.g. a cluster from PG_TEST_FSYNC=on scripts/pg-test-server.sh start).
set -euo pipefail
url="${1:?usage: run.sh POSTGRES_URL}"
cd "$(dirname "$0")"
psql -q "$url" -f schema.sql >/dev/null 2>&1
for round in 1 2 3; do
  for f in floor bare bare_on_conflict step_lean step_general; do
    printf '%-18s ' "$f"
    pgbench -n -M prepared -D rid=r1 -D owner=me -c 1 -T 8 -f "$f.sql" "$url" 2>/dev/null | grep 'latency average'
  done
done
