#!/usr/bin/env bash
# Lists the imports between the modules of a directory of a crate (default engine/src/run/, the runtime; a
# crate root such as engine/src works too) as "from -> to" edges, then the modules in layers (each after
# everything it imports), and fails if the imports form a cycle, printing each cycle and the files and paths
# that make its imports. `crate::`/`super::` paths in use declarations (grouped ones too) and in code count;
# comments, strings and test code (`#[cfg(test)]`) do not. The logic is in scripts/module_imports.py
# (`--why` prints the paths behind every edge; `--self-test` checks it on a fake crate).
# Usage: scripts/run-imports.sh [--why] [dir]   (default: engine/src/run; dir relative to the cwd or the repository root)
exec python3 "$(dirname "$0")/module_imports.py" "$@"
