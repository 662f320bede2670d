#!/usr/bin/env bash
# What one sync step's statement costs PostgreSQL beyond the floor (docs/performance.md, issue #45):
# `pgbench -M prepared -c 1` of bench/pgbench/*.sql on a throwaway cluster (scripts/pg-test-server.sh, fsync
# off, so that the statements' own cost shows, not the disk's): one single-row insert (the floor), our journal
# row alone, the fenced write as the PostgreSQL store sends it, and the same without `FOR SHARE`.
# Usage: scripts/pg-statement-cost.sh [seconds per script, default 8] [rounds, default 2]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-8}"
rounds="${2:-2}"
pgbench="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)/pgbench"
[ -x "$pgbench" ] || { echo "pg-statement-cost: pgbench not found (the postgresql package)" >&2; exit 1; }
eval "$("$here/scripts/pg-test-server.sh" start)"
trap '"$here/scripts/pg-test-server.sh" stop "$AGENTIC_TEST_PG_DIR" >/dev/null 2>&1' EXIT
psql "$AGENTIC_TEST_PG_URL" -q -f "$here/bench/pgbench/setup.sql" 2>/dev/null
for round in $(seq "$rounds"); do
  for script in floor journal_row fenced_write fenced_write_no_lock; do
    latency=$("$pgbench" -M prepared -n -c 1 -T "$secs" -f "$here/bench/pgbench/$script.sql" "$AGENTIC_TEST_PG_URL" 2>&1 \
      | sed -n 's/^latency average = //p')
    echo "round $round: $script: $latency"
  done
done
