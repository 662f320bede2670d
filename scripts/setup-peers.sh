#!/usr/bin/env bash
# Creates the virtualenv of the protocol peers the MCP and A2A tests talk to — the official Python SDKs `mcp`
# and `a2a-sdk`, pinned in tests/peers/requirements.lock.txt — at ${AGENTIC_PEERS:-target/peers}. Reused while
# the lock file is unchanged. The tests find it there (or through AGENTIC_PEERS_PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${AGENTIC_PEERS:-target/peers}"
lock=tests/peers/requirements.lock.txt
if [ -x "$venv/bin/python" ] && cmp -s "$lock" "$venv/requirements.lock.txt"; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock"
cp "$lock" "$venv/requirements.lock.txt"
echo "peers: $venv ($(grep -E '^(mcp|a2a-sdk)==' "$lock" | tr '\n' ' '))"
