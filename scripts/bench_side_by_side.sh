#!/usr/bin/env bash
# Side by side on THIS machine: the LangGraph baseline harness (../shared/bench/langgraph) and our engine, back
# to back, then ONE table: scenario | LangGraph | ours | ratio | target. A thin wrapper around the bench crate:
#
#   cargo run --release -p agentic-bench -- --langgraph [--quick] [--scenario NAME[,NAME…]]
#
# Usage: scripts/bench_side_by_side.sh [--quick] [--scenario seq,fanout,resume,concurrent,disk,fsync,llm]
#        (full: ~7-10 min on 2 cores, most of it the Python harness; --quick: ~1.5 min)
# Env:   LG_HARNESS  the harness directory (default: ../shared/bench/langgraph from the workspace)
#        OUT         where the table, the virtualenv (venv/, created once from requirements.lock.txt), the
#                    harness copy (langgraph/) and scratch stores go (default: target/bench). It must be on the
#                    disk under test.
#
# The table is printed on stdout and written to $OUT/side_by_side.md; docs/performance.md explains every row.
# Without a working Python/pip the LangGraph column falls back to the harness's recorded results-langgraph.md
# and the table says so.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
args=(--langgraph)
if [ -n "${OUT:-}" ]; then
  args+=(--out "$OUT")
fi
exec cargo run --release --quiet -p agentic-bench -- "${args[@]}" "$@"
