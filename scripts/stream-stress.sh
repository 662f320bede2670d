#!/usr/bin/env bash
# The cross-server event-stream tests (tests/server_cluster.rs, the tests named `events_*`) run ROUNDS times
# in a row while two CPU hogs (busy shell loops) take the machine's cores, to find an ordering bug that only
# shows when the servers, PostgreSQL and the test's reader are starved (docs/reliability.md).
#
#   scripts/stream-stress.sh 20      # the documented stress: 20 rounds (about 20 minutes on 2 cores)
#   scripts/stream-stress.sh 3       # what CI runs (.ci/run)
#
# Uses the PostgreSQL server of AGENTIC_TEST_PG_URL when set, else starts a throwaway one
# (scripts/pg-test-server.sh) and stops it at the end. Builds the test binary first (not timed), then prints
# one line per round (`round i/N: ok|FAILED in S s`) and a summary: rounds, failures, the tests and hogs. A
# failed round's output is kept in $STRESS_LOGS (default: target/stream-stress) and the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-20}
logs=${STRESS_LOGS:-target/stream-stress}
mkdir -p "$logs"

own_pg=""
if [ -z "${AGENTIC_TEST_PG_URL:-}" ]; then
  eval "$(scripts/pg-test-server.sh start)"
  own_pg=$AGENTIC_TEST_PG_DIR
  trap 'scripts/pg-test-server.sh stop "$own_pg"' EXIT
fi
export AGENTIC_REQUIRE_PG=1

echo "== building the cluster tests" >&2
cargo test --locked --test server_cluster --no-run >&2

hogs=()
stop_hogs() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  hogs+=("$!")
done
trap 'stop_hogs; if [ -n "$own_pg" ]; then scripts/pg-test-server.sh stop "$own_pg"; fi' EXIT

failures=0
tests=$(cargo test --locked --test server_cluster events_ -- --list 2>/dev/null | grep ': test$' | sed 's/: test$//' | paste -sd, -)
start=$(date +%s)
for i in $(seq 1 "$rounds"); do
  t0=$(date +%s)
  log="$logs/round-$i.log"
  if cargo test --locked --test server_cluster events_ -- --nocapture --test-threads 1 >"$log" 2>&1; then
    echo "round $i/$rounds: ok in $(( $(date +%s) - t0 )) s"
    rm -f "$log"
  else
    failures=$((failures + 1))
    echo "round $i/$rounds: FAILED in $(( $(date +%s) - t0 )) s (output: $log)"
    grep -E "panicked|assertion|left:|right:" "$log" | head -5 || true
  fi
done
echo "stream stress: $rounds rounds of [$tests] under 2 CPU hogs on $(nproc) cores, $failures failed, $(( $(date +%s) - start )) s"
[ "$failures" -eq 0 ]
