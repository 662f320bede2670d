#!/usr/bin/env bash
# Coverage-guided fuzzing of the project's decoders (fuzz/, cargo-fuzz with libFuzzer; a nightly toolchain).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     each target for SECONDS (default 60), all targets by default
#   SAVE=1 scripts/fuzz.sh 3600               an hour each, then the minimized corpus is saved in the repository
#   JOBS=2 scripts/fuzz.sh 600                two fuzzing processes per target (libFuzzer -fork)
#
# Each target starts from its seeds (fuzz/seeds/<target>, readable inputs written by hand or taken from real
# runs) and its saved corpus (fuzz/corpora/<target>.tar.gz, the minimized inputs of earlier runs), unpacked into
# fuzz/corpus/<target> (not in git). A crash, a timeout (10 s) or running out of memory (2 GiB) stops the run,
# leaves the input in fuzz/artifacts/<target> and makes the script exit non-zero. The figures of
# docs/reliability.md come from these runs (`-print_final_stats=1` prints them).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(spec_yaml spec_json expression store_records wal_recovery a2a_messages http_api auth_tenants)
fi
if ! command -v cargo-fuzz >/dev/null; then
  cargo install cargo-fuzz --locked --version 0.13.2
fi
flags=(-O --debug-assertions)
cargo +nightly fuzz build "${flags[@]}"
# The built targets run directly (not `cargo fuzz run`, which would rebuild them when a source changes).
bin="target/x86_64-unknown-linux-gnu/release"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_odr_violation=0}"
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t" corpora
  cp -n "seeds/$t/"* "corpus/$t/" 2>/dev/null || true
  if [ -f "corpora/$t.tar.gz" ]; then
    tar -xzf "corpora/$t.tar.gz" -C "corpus/$t"
  fi
  echo "== $t: ${secs} s"
  "$bin/$t" -artifact_prefix="artifacts/$t/" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -close_fd_mask=3 ${JOBS:+-fork="$JOBS"} "corpus/$t"
  if [ "${SAVE:-0}" = 1 ]; then
    rm -rf "corpus/$t.min" && mkdir "corpus/$t.min"
    "$bin/$t" -merge=1 -rss_limit_mb=2048 -close_fd_mask=3 "corpus/$t.min" "corpus/$t" >/dev/null 2>&1
    rm -rf "corpus/$t" && mv "corpus/$t.min" "corpus/$t"
    tar -czf "corpora/$t.tar.gz" -C "corpus/$t" .
    echo "== $t: corpus saved, $(find "corpus/$t" -type f | wc -l) inputs, $(du -h "corpora/$t.tar.gz" | cut -f1)"
  fi
done
