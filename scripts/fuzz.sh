#!/usr/bin/env bash
# Coverage-guided fuzzing of the project's decoders (fuzz/, cargo-fuzz with libFuzzer; a nightly toolchain).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     each target for SECONDS (default 60), all targets by default
#   JOBS=2 scripts/fuzz.sh 3600               one hour per target, two fuzzing processes each
#
# New inputs that reach new code go to fuzz/corpus/<target>; a crash, a timeout (10 s) or running out of
# memory (2 GiB) stops the run and leaves the input in fuzz/artifacts/<target>, and the script exits non-zero.
# The figures of docs/reliability.md come from these runs (`-print_final_stats=1` prints them).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(spec_yaml spec_json expression store_records wal_recovery a2a_messages)
fi
if ! command -v cargo-fuzz >/dev/null; then
  cargo install cargo-fuzz --locked --version 0.13.2
fi
jobs="${JOBS:-1}"
flags=(-O --debug-assertions)
cargo +nightly fuzz build "${flags[@]}"
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  echo "== $t: ${secs} s"
  cargo +nightly fuzz run "${flags[@]}" "$t" "corpus/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -close_fd_mask=3 \
    $([ "$jobs" -gt 1 ] && echo "-fork=$jobs")
done
