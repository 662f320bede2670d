#!/usr/bin/env bash
# Lists the imports between the modules of engine/src/run/ (the runtime) as "from -> to" edges, then the
# modules in dependency order (each after everything it imports), and fails if the imports form a cycle.
# Test modules (`#[cfg(test)]` to the end of a file) are left out: their `super` is the file itself.
# Usage: scripts/run-imports.sh [dir]   (default: engine/src/run, from the repository root)
set -euo pipefail
dir=${1:-"$(dirname "$0")/../engine/src/run"}
modules=$(cd "$dir" && ls *.rs | sed 's/\.rs$//' | grep -vx mod)
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for m in $modules; do
  # The file up to its tests, with `use super::{a::X, b}` groups split into one path per line.
  sed '/^#\[cfg(test)\]/,$d; s|//.*$||' "$dir/$m.rs" \
    | { grep -oE '(super|crate::run)::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)' || true; } \
    | sed -E 's/^(super|crate::run):://; s/^\{//; s/\}$//' | tr ',' '\n' | sed -E 's/^ *//; s/::.*//' \
    | { grep -v '^$' || true; } | sort -u | while read -r target; do
        if grep -qx "$target" <<<"$modules"; then
          [ "$target" != "$m" ] && echo "$m $target"
        else
          # An item of run/mod.rs itself: mod.rs re-exports every module, so this is a cycle through it.
          echo "$m mod"
          echo "mod $m"
        fi
      done
done | sort -u > "$edges"
echo "imports (module -> module it imports):"
awk '{ printf "  %-14s -> %s\n", $1, $2 }' "$edges"
# Every module is a node (leaves import nothing of run/); tsort reads "before after" pairs.
{ cat "$edges"; for m in $modules; do echo "$m $m"; done; } | awk '{ print $2, $1 }' > "$edges.t"
if ! order=$(tsort "$edges.t" 2>"$edges.err") || [ -s "$edges.err" ]; then
  echo "CYCLE in the imports of $dir:" >&2
  cat "$edges.err" >&2
  rm -f "$edges.t" "$edges.err"
  exit 1
fi
rm -f "$edges.t" "$edges.err"
echo "layers (each module after the modules it imports): $(echo $order)"
echo "no cycle"
