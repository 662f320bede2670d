#!/usr/bin/env python3
"""Lists the imports between the modules of one directory of a Rust crate and fails if they form a cycle.

Usage: module_imports.py [--why] [DIR]     (default DIR: engine/src/run of this repository)
       module_imports.py --self-test

DIR is a module directory (engine/src/run) or a crate root (engine/src). Its modules (the nodes) are its
direct children: every `x.rs` (but `mod.rs`, `lib.rs`, `main.rs`) and every directory `x/` that is a module
(`x.rs` beside it or `x/mod.rs`); a directory module's sources are `x.rs` and every `.rs` file under `x/`.

In every source (up to a line starting with `#[cfg(test)]`, without comments, string literals and items
marked `#[cfg(test)]`) every path starting with `crate::` or `super::` (use declarations, grouped use trees,
inline paths in code) is resolved to the node it names. A path to an item of DIR's own module file (`lib.rs`,
`DIR/mod.rs` or `DIR.rs`) is followed through that file's `use` declarations (`pub use a::{B, C}`) to the
node it comes from; an item defined in the module file itself makes an edge to the pseudo-node `mod` both
ways (the module file declares every module, so that is a cycle through it). Paths that leave DIR, `self::`
paths and paths inside the importing node are ignored.

Prints the edges (`from -> to`) and the layers (a module's layer is 1 + the highest layer of what it
imports), exit 0; on a cycle prints the cycles and, for each import in them, the files and paths making it
to stderr, exit 1. `--why` also prints, for every edge, the paths making it.
"""

from __future__ import annotations

import heapq
import os
import re
import sys
import tempfile
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

MOD = "mod"  # the pseudo-node: DIR's own module file
PATH_STARTS = ("crate", "$crate", "super")


# ----------------------------------------------------------------------------------------------- lexing


def cut_tests(text: str) -> str:
    """The text up to the first line starting with `#[cfg(test)]`."""
    m = re.search(r"^#\[cfg\(test\)\]", text, re.M)
    return text[: m.start()] if m else text


def strip(text: str) -> str:
    """The text with comments, string and char literals blanked (newlines kept, so line numbers hold)."""
    out: list[str] = []
    i, n = 0, len(text)

    def blank(s: str) -> str:
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := re.compile(r'(?:b|c)?r(#*)"').match(text, i)) and (i == 0 or not is_ident_char(text[i - 1])):
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append(blank(text[i:j]))
            i = j
        elif c == '"' or (c in "bc" and text.startswith('"', i + 1) and (i == 0 or not is_ident_char(text[i - 1]))):
            j = text.index('"', i) + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(blank(text[i:j]))
            i = j
        elif c == "'" or (c == "b" and text.startswith("'", i + 1) and (i == 0 or not is_ident_char(text[i - 1]))):
            q = text.index("'", i)
            if text.startswith("\\", q + 1):  # '\n', '\'', '\u{..}'
                j = q + 3
                while j < n and text[j] != "'" and text[j] != "\n":
                    j += 1
                j = min(j + 1, n)
            elif q + 2 < n and text[q + 2] == "'" and text[q + 1] != "\n":  # 'a'
                j = q + 3
            else:  # a lifetime or a label
                out.append(text[i : q + 1])
                i = q + 1
                continue
            out.append(blank(text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_ident_char(c: str) -> bool:
    return c.isalnum() or c == "_"


TOKEN = re.compile(r"\$?(?:r#)?[A-Za-z_][A-Za-z0-9_]*|::|\S")


def tokenize(text: str) -> list[tuple[str, int]]:
    """(token, line) pairs; identifiers (`r#` dropped), `::`, single punctuation characters."""
    toks: list[tuple[str, int]] = []
    line, last = 1, 0
    for m in TOKEN.finditer(text):
        line += text.count("\n", last, m.start())
        last = m.start()
        t = m.group()
        toks.append((t.replace("r#", "", 1) if t.startswith("r#") else t, line))
    return toks


def is_ident(t: str) -> bool:
    return bool(re.fullmatch(r"\$?[A-Za-z_][A-Za-z0-9_]*", t))


def skip_item(toks: list[tuple[str, int]], i: int) -> int:
    """The index after the item starting at i (up to `;` or its closing `}` at depth 0)."""
    depth = 0
    while i < len(toks):
        t = toks[i][0]
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
            if depth <= 0 and t == "}":
                return i + 1
        elif t == ";" and depth == 0:
            return i + 1
        i += 1
    return i


# ------------------------------------------------------------------------------------------------ paths


@dataclass
class UsePath:
    segs: list[str]  # crate/super/self/... as written, groups expanded; '*' for a glob
    alias: str | None
    line: int
    inline: tuple[str, ...]  # the inline `mod x { .. }` blocks it is in
    is_use: bool  # in a `use` declaration (not an inline path)


def parse_tree(toks, i, prefix):
    """Parses a use tree (or an inline path) at i: ([(segments, alias)], index after it)."""
    segs = list(prefix)
    tok = lambda k: toks[k][0] if k < len(toks) else ""
    if tok(i) == "{":
        return parse_group(toks, i, segs)
    if tok(i) == "*":
        return [(segs + ["*"], None)], i + 1
    while is_ident(tok(i)) and tok(i) != "as":
        segs.append(tok(i))
        i += 1
        if tok(i) != "::":
            break
        nxt = tok(i + 1)
        if nxt == "{":
            return parse_group(toks, i + 1, segs)
        if nxt == "*":
            return [(segs + ["*"], None)], i + 2
        if not is_ident(nxt):  # `::<T>` and such: the path ends
            break
        i += 1
    alias = None
    if tok(i) == "as" and is_ident(tok(i + 1)):
        alias, i = tok(i + 1), i + 2
    return [(segs, alias)], i


def parse_group(toks, i, prefix):
    """`{ tree, tree, ... }` at i, every tree prefixed."""
    out = []
    i += 1
    while i < len(toks) and toks[i][0] != "}":
        if toks[i][0] == ",":
            i += 1
            continue
        sub, j = parse_tree(toks, i, prefix)
        out += [s for s in sub if len(s[0]) > len(prefix)]
        i = j if j > i else i + 1
    return out, i + 1


def scan(text: str, *, uses_only: bool = False) -> list[UsePath]:
    """Every `crate::`/`super::` path of the (already cut and stripped) text, or with uses_only every `use`
    declaration (any first segment)."""
    toks = tokenize(text)
    found: list[UsePath] = []
    mods: list[tuple[str, int]] = []  # inline modules: (name, brace depth inside it)
    depth = 0
    i = 0
    t = lambda k: toks[k][0] if 0 <= k < len(toks) else ""
    while i < len(toks):
        tk, line = toks[i]
        if tk == "#" and t(i + 1) == "[" and t(i + 2) == "cfg" and t(i + 3) == "(" and t(i + 4) == "test" and t(i + 5) == ")":
            j = i + 7  # after `]`: skip the test-only item (and its other attributes)
            while t(j) == "#" and t(j + 1) == "[":
                j = skip_brackets(toks, j + 1)
            i = skip_item(toks, j)
            continue
        if tk == "mod" and is_ident(t(i + 1)) and t(i + 2) == "{":
            depth += 1
            mods.append((t(i + 1), depth))
            i += 3
            continue
        if tk == "{":
            depth += 1
        elif tk == "}":
            if mods and mods[-1][1] == depth:
                mods.pop()
            depth -= 1
        elif tk == "use" and t(i - 1) != "::":
            sub, j = parse_tree(toks, i + 1, [])
            inl = tuple(m for m, _ in mods)
            for segs, alias in sub:
                if uses_only or (segs and segs[0] in PATH_STARTS):
                    found.append(UsePath(segs, alias, line, inl, True))
            i = max(j, i + 1)
            continue
        elif not uses_only and tk in PATH_STARTS and t(i + 1) == "::" and t(i - 1) != "::":
            sub, j = parse_tree(toks, i, [])
            inl = tuple(m for m, _ in mods)
            for segs, alias in sub:
                found.append(UsePath(segs, alias, line, inl, False))
            i = max(j, i + 1)
            continue
        i += 1
    return found


def skip_brackets(toks, i):
    depth = 0
    while i < len(toks):
        if toks[i][0] == "[":
            depth += 1
        elif toks[i][0] == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def show(segs: list[str]) -> str:
    return "::".join(segs)


# -------------------------------------------------------------------------------------------- the crate


@dataclass
class Crate:
    dir: Path  # DIR
    root: Path  # the crate root directory (holding lib.rs or main.rs)
    mpath: tuple[str, ...]  # DIR's module path
    nodes: dict[str, list[Path]]  # node -> its source files
    mod_file: Path | None
    mod_text: str = ""
    node_uses: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    exports: dict[tuple[str, ...], tuple[str, ...] | None] = field(default_factory=dict)  # name -> path (None: extern)
    globs: dict[tuple[str, ...], list[tuple[str, ...]]] = field(default_factory=dict)  # module -> glob sources

    def rel(self, p: Path) -> str:
        return p.relative_to(self.root).as_posix()


def find_crate(d: Path) -> Crate:
    d = d.resolve()
    root = next((a for a in [d, *d.parents] if (a / "lib.rs").is_file() or (a / "main.rs").is_file()), None)
    if root is None:
        sys.exit(f"{d}: no lib.rs or main.rs in it or above it")
    mpath = d.relative_to(root).parts
    nodes: dict[str, list[Path]] = {}
    for p in sorted(d.iterdir()):
        if p.is_file() and p.suffix == ".rs" and p.name not in ("mod.rs", "lib.rs", "main.rs"):
            nodes.setdefault(p.stem, []).insert(0, p)
        elif p.is_dir() and ((d / f"{p.name}.rs").is_file() or (p / "mod.rs").is_file()):
            nodes.setdefault(p.name, []).extend(sorted(p.rglob("*.rs")))
    if not mpath:
        mod_file = next((root / f for f in ("lib.rs", "main.rs") if (root / f).is_file()), None)
    else:
        mod_file = next((f for f in (d / "mod.rs", d.parent / f"{d.name}.rs") if f.is_file()), None)
    crate = Crate(d, root, mpath, nodes, mod_file)
    if mod_file:
        crate.mod_text = source(mod_file)
        read_exports(crate)
    return crate


def source(p: Path) -> str:
    return strip(cut_tests(p.read_text(encoding="utf-8", errors="replace")))


def file_module(crate: Crate, f: Path) -> tuple[str, ...]:
    parts = f.relative_to(crate.root).with_suffix("").parts
    return parts[:-1] if parts[-1] in ("mod", "lib", "main") and len(parts) >= 1 else parts


def absolute(segs: list[str], module: tuple[str, ...], crate: Crate | None = None) -> tuple[str, ...] | None:
    """The path from the crate root named by segs written in `module`; None for `self::` and extern paths
    and for a `super` above the crate root."""
    if not segs:
        return None
    if segs[0] in ("crate", "$crate"):
        return tuple(s for s in segs[1:] if s != "self") or None
    if segs[0] == "super":
        k = 0
        while k < len(segs) and segs[k] == "super":
            k += 1
        if k > len(module):
            return None
        return tuple(module[: len(module) - k]) + tuple(s for s in segs[k:] if s != "self")
    if segs[0] == "self":
        return None
    # A relative path in the module file: a child module of it, or an extern crate.
    if crate is not None and module == crate.mpath and segs[0] in crate.nodes:
        return module + tuple(s for s in segs if s != "self")
    return None


def read_exports(crate: Crate) -> None:
    """The `use` declarations of DIR's module file: what each name of it (an alias) stands for."""
    for u in scan(crate.mod_text, uses_only=True):
        module = crate.mpath + u.inline
        segs = u.segs
        if not segs:
            continue
        if segs[0] == "self":
            target = module + tuple(s for s in segs[1:] if s != "self")
        else:
            target = absolute(segs, module, crate)  # None: an extern crate's item
        if segs[-1] == "*":
            if target is not None:
                crate.globs.setdefault(u.inline, []).append(target[:-1])
            continue
        name = u.alias or next(s for s in reversed(segs) if s != "self")
        if name != "_":
            crate.exports[u.inline + (name,)] = target


# ---------------------------------------------------------------------------------------------- resolving


def resolve_at_dir(crate: Crate, rest: tuple[str, ...], seen=frozenset()) -> tuple[str, str, tuple] | None:
    """The node named by the path rest (relative to DIR), a note on how, and the rest of the path in the
    node; None when it leaves DIR."""
    if not rest:
        return None
    if rest[0] in crate.nodes:
        return rest[0], "", rest[1:]
    if rest in seen:
        return MOD, "", ()
    for k in range(len(rest), 0, -1):
        key = rest[:k]
        if key in crate.exports:
            if crate.exports[key] is None:
                return None  # an extern crate's item, re-exported
            target = crate.exports[key] + rest[k:]
            return follow(crate, target, seen | {rest}, f"via {crate.rel(crate.mod_file)}: {show(key)}")
    # Not named by a `use`: an item of the module file, or of a module it glob-imports (`pub use a::*`,
    # at its top or in an inline module `k` segments deep), preferring a glob whose module defines the name.
    m = len(crate.mpath)

    def via_glob(k: int, any_single: bool):
        globs = [g for g in crate.globs.get(rest[:k], []) if g[:m] == crate.mpath and len(g) > m]
        hits = [g for g in globs if g[m] in crate.nodes and any(defines(source(f), rest[k]) for f in crate.nodes[g[m]])]
        for g in hits or (globs if any_single and len(globs) == 1 else []):
            return follow(crate, g + rest[k:], seen | {rest}, f"via {crate.rel(crate.mod_file)}: {show(rest[:k] + ('*',))}")
        return False

    for k in range(len(rest) - 1, 0, -1):
        if (r := via_glob(k, False)) is not False:
            return r
    if defines(crate.mod_text, rest[0]):
        return MOD, "", ()
    for k in range(len(rest) - 1, -1, -1):
        if (r := via_glob(k, True)) is not False:
            return r
    return MOD, "", ()


def defines(text: str, name: str) -> bool:
    """Whether the (stripped) text defines an item called name."""
    kinds = r"struct|enum|union|trait|type|fn|const|static|mod"
    return bool(re.search(rf"\b(?:{kinds})\s+{re.escape(name)}\b|\bmacro_rules!\s*{re.escape(name)}\b", text))


def follow(crate, target, seen, note):
    n = len(crate.mpath)
    if target[:n] != crate.mpath or len(target) == n:
        return None  # re-exported from outside DIR
    r = resolve_at_dir(crate, target[n:], seen)
    return None if r is None else (r[0], note, r[2])


def reexported_from(crate: Crate, node: str, tail: tuple[str, ...]) -> str | None:
    """The other node an item of node comes from when node only re-exports it (`pub use crate::x::Y`)."""
    if not tail or node == MOD:
        return None
    if node not in crate.node_uses:
        main = [f for f in crate.nodes[node] if file_module(crate, f) == crate.mpath + (node,)]
        uses = {}
        for f in main:
            for u in scan(source(f), uses_only=True):
                if not u.inline and u.segs and u.segs[-1] != "*":
                    t = absolute(u.segs, crate.mpath + (node,))
                    if t is not None:
                        uses[u.alias or t[-1]] = t
        crate.node_uses[node] = uses
    t = crate.node_uses[node].get(tail[0])
    n = len(crate.mpath)
    if t is None or t[:n] != crate.mpath or len(t) <= n + 1 or t[n] == node:
        return None
    r = resolve_at_dir(crate, t[n:])
    return r[0] if r and r[0] != node else None


@dataclass(frozen=True)
class Why:
    file: str
    line: int
    path: str
    note: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.path}" + (f"  ({self.note})" if self.note else "")


def declaration(crate: Crate, node: str) -> Why:
    """Why the module file imports node: it declares it (`mod node;`)."""
    if crate.mod_file is None:
        return Why("(no module file)", 0, f"mod {node}", "")
    text = source(crate.mod_file)
    m = re.search(rf"^[^\n]*\bmod\s+{re.escape(node)}\s*;", text, re.M)
    line = text.count("\n", 0, m.start()) + 1 if m else 0
    return Why(crate.rel(crate.mod_file), line, f"mod {node}", "declares it: the cycle is through it")


def edges_of(crate: Crate) -> dict[tuple[str, str], list[Why]]:
    edges: dict[tuple[str, str], list[Why]] = defaultdict(list)
    n = len(crate.mpath)
    for node, files in crate.nodes.items():
        for f in files:
            fmod = file_module(crate, f)
            for u in scan(source(f)):
                target = absolute(u.segs, fmod + u.inline)
                if target is None or target[:n] != crate.mpath:
                    continue  # self::, outside DIR
                rest = target[n:]
                if not rest:
                    continue  # DIR itself (a visibility `pub(in crate::run)`)
                if rest == ("*",):
                    r = (MOD, "a glob of the module file", ())
                else:
                    r = resolve_at_dir(crate, rest)
                if r is None or r[0] == node:
                    continue
                note = r[1]
                if (origin := reexported_from(crate, r[0], r[2])) is not None:
                    note += ("; " if note else "") + f"{r[0]} re-exports it from {origin}"
                why = Why(crate.rel(f), u.line, show(u.segs), note)
                edges[(node, r[0])].append(why)
                if r[0] == MOD:
                    edges[(MOD, node)].append(declaration(crate, node))
    for k in edges:
        edges[k] = sorted(set(edges[k]), key=lambda w: (w.file, w.line, w.path))
    return dict(edges)


# ------------------------------------------------------------------------------------------------ graphs


def sccs(nodes: list[str], succ: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for s in nodes:
        if s in index:
            continue
        work = [(s, iter(succ.get(s, [])))]
        index[s] = low[s] = counter
        counter += 1
        stack.append(s)
        on.add(s)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ.get(w, []))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def shortest(succ, src, dst, allowed) -> list[str] | None:
    prev = {src: None}
    q = deque([src])
    while q:
        v = q.popleft()
        if v == dst:
            path = []
            while v is not None:
                path.append(v)
                v = prev[v]
            return path[::-1]
        for w in succ.get(v, []):
            if w in allowed and w not in prev:
                prev[w] = v
                q.append(w)
    return None


def cycles_of(comp: list[str], succ) -> list[list[str]]:
    """Cycles through the component covering every import inside it: the shortest cycle through each
    import not yet in one (so cutting one import of each cycle listed is needed to break the component)."""
    allowed = set(comp)
    covered: set[tuple[str, str]] = set()
    out = []
    for u in comp:
        for v in succ.get(u, []):
            if v in allowed and (u, v) not in covered:
                back = shortest(succ, v, u, allowed)
                cyc = [u] + back
                out.append(cyc)
                covered |= set(zip(cyc, cyc[1:]))
    return out


def layers(nodes: list[str], edges) -> list[list[str]]:
    """Kahn's order, ties broken alphabetically; a node's layer is 1 + the highest layer of what it imports."""
    deps = defaultdict(set)
    users = defaultdict(set)
    for a, b in edges:
        deps[a].add(b)
        users[b].add(a)
    left = {v: len(deps[v]) for v in nodes}
    heap = [v for v in nodes if left[v] == 0]
    heapq.heapify(heap)
    layer: dict[str, int] = {}
    while heap:
        v = heapq.heappop(heap)
        layer[v] = 1 + max((layer[d] for d in deps[v]), default=-1)
        for u in users[v]:
            left[u] -= 1
            if left[u] == 0:
                heapq.heappush(heap, u)
    out: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for v in sorted(layer):
        out[layer[v]].append(v)
    return out


# -------------------------------------------------------------------------------------------------- main


def report(d: Path, shown: str, why_all: bool = False, out=sys.stdout, err=sys.stderr) -> int:
    crate = find_crate(d)
    edges = edges_of(crate)
    print("imports (module -> module it imports):", file=out)
    for a, b in sorted(edges):
        print(f"  {a:<14} -> {b}", file=out)
        if why_all:
            for w in edges[(a, b)]:
                print(f"      {w}", file=out)
    nodes = sorted(set(crate.nodes) | {x for e in edges for x in e})
    succ: dict[str, list[str]] = defaultdict(list)
    for a, b in sorted(edges):
        succ[a].append(b)
    comps = [c for c in sccs(nodes, succ) if len(c) > 1]
    if comps:
        print(f"CYCLE in the imports of {shown}:", file=err)
        comps.sort()
        for k, comp in enumerate(comps, 1):
            inner = sorted((a, b) for (a, b) in edges if a in comp and b in comp)
            print(f"cycle {k}: {len(comp)} modules import each other ({' '.join(comp)}); "
                  f"to break it, cut one import of each cycle below:", file=err)
            for cyc in cycles_of(comp, succ):
                print("  " + " -> ".join(cyc), file=err)
            print(f"  the {len(inner)} imports among them, and what makes them:", file=err)
            for a, b in inner:
                ws = edges[(a, b)]
                print(f"    {a} -> {b}  ({len(ws)} path{'s' if len(ws) != 1 else ''})", file=err)
                for w in ws:
                    print(f"        {w}", file=err)
        return 1
    print("layers (each module after the modules it imports):", file=out)
    for k, layer in enumerate(layers(nodes, edges)):
        print(f"  {k}: {' '.join(layer)}", file=out)
    print("no cycle", file=out)
    return 0


def main(argv: list[str]) -> int:
    why = "--why" in argv
    args = [a for a in argv if a != "--why"]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if args and args[0] == "--self-test":
        return self_test()
    repo = Path(__file__).resolve().parent.parent
    if not args:
        return report(repo / "engine/src/run", "engine/src/run", why)
    d = Path(args[0])
    if not d.is_dir() and not d.is_absolute() and (repo / d).is_dir():
        d = repo / d  # relative to the repository root
    if not d.is_dir():
        print(f"{args[0]}: no such directory", file=sys.stderr)
        return 2
    return report(d, args[0], why)


# --------------------------------------------------------------------------------------------- self-test

FAKE = {
    "lib.rs": """
        //! The fake crate: `crate::d::Doc` in a doc comment is no import.
        mod a;
        mod b;
        mod c;
        mod d;
        mod dirmod;
        pub use a::{Alpha, AlphaRef};
        pub use b::inner::Beta;
        pub(crate) use c::Gamma as G;
        pub use d::*;
        pub use futures::future::BoxFuture;
        pub struct Root;
        pub mod __private {
            pub use crate::dirmod::Delta;
        }
    """,
    "a.rs": """
        // crate::c::InAComment
        use crate::{b::inner::{Beta, BetaX}, Root};
        use crate::BoxFuture;
        const S: &str = "crate::c::InAString";
        const R: &str = r#"crate::c::InARawString "quoted""#;
        fn f<'a>(x: &'a str) -> char {
            let _ = crate::G::new(); /* a /* nested */ block: crate::c::InABlock */
            let _ = crate::d::Dee { x: 1 };
            '"'
        }
        #[cfg(test)]
        mod tests {
            use crate::dirmod::InTests;
        }
    """,
    "b.rs": "pub mod inner;\npub mod other;\n",
    "b/inner.rs": """
        use super::super::c::Gamma;
        use super::other::Sibling;
        use crate::b::other::Same;
        pub struct Beta;
    """,
    "b/other.rs": """
        use super::inner::Beta;
        pub(in crate::b) struct Sibling;
        fn g() { crate::b::inner::Beta::new(); let _ = self::Sibling; }
    """,
    "c.rs": """
        use crate::AlphaRef;
        pub use crate::d::Dee;
        pub struct Gamma;
        pub(crate) fn h() {}
    """,
    "d.rs": """
        /// `crate::a::Alpha` in a doc: no import
        pub struct Dee { pub x: u8 }
        impl Dee {
            #[cfg(test)]
            pub(crate) fn only_in_tests() -> crate::a::Alpha { todo!() }
            pub fn after() -> char { 'x' }
        }
    """,
    "dirmod/mod.rs": """
        mod sub;
        use super::{a::Alpha, d};
        pub struct Delta;
    """,
    "dirmod/sub.rs": """
        use super::super::d::Dee;
        use self::inner::Q;
        use crate::dirmod::Delta;
        fn k() { let _ = crate::c::Dee { x: 1 }; }
        mod inner {
            pub struct Q;
            use super::super::Delta;
        }
    """,
    "e/stray.rs": "use crate::a::Alpha;\n",  # e/ is no module (no e.rs, no e/mod.rs)
}


def self_test() -> int:
    import io
    import textwrap

    failures = []

    def check(name, got, want):
        if got != want:
            failures.append(f"{name}:\n  got  {got!r}\n  want {want!r}")

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        for rel, text in FAKE.items():
            p = src / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(textwrap.dedent(text).lstrip("\n"))

        crate = find_crate(src)
        check("crate root nodes", sorted(crate.nodes), ["a", "b", "c", "d", "dirmod"])
        edges = edges_of(crate)
        check("crate root edges", sorted(edges), [
            ("a", "b"), ("a", "c"), ("a", "d"), ("a", "mod"), ("b", "c"), ("c", "a"), ("c", "d"),
            ("dirmod", "a"), ("dirmod", "c"), ("dirmod", "d"), ("mod", "a"),
        ])
        why = lambda e: [str(w) for w in edges.get(e, [])]
        check("a -> b", why(("a", "b")), ["a.rs:2: crate::b::inner::Beta", "a.rs:2: crate::b::inner::BetaX"])
        check("a -> c through an alias", why(("a", "c")), ["a.rs:7: crate::G::new  (via lib.rs: G)"])
        check("a -> d", why(("a", "d")), ["a.rs:8: crate::d::Dee"])
        check("a -> mod", why(("a", "mod")), ["a.rs:2: crate::Root"])
        check("mod -> a", why(("mod", "a")), ["lib.rs:2: mod a  (declares it: the cycle is through it)"])
        check("b -> c", why(("b", "c")), ["b/inner.rs:1: super::super::c::Gamma"])
        check("c -> a", why(("c", "a")), ["c.rs:1: crate::AlphaRef  (via lib.rs: AlphaRef)"])
        check("dirmod -> c", why(("dirmod", "c")), ["dirmod/sub.rs:4: crate::c::Dee  (c re-exports it from d)"])
        check("dirmod -> d", why(("dirmod", "d")), ["dirmod/mod.rs:2: super::d", "dirmod/sub.rs:1: super::super::d::Dee"])
        out, err = io.StringIO(), io.StringIO()
        check("cycle exit code", report(src, "src", out=out, err=err), 1)
        check("cycle report", [l for l in err.getvalue().splitlines() if not l.startswith("    ")], [
            "CYCLE in the imports of src:",
            "cycle 1: 4 modules import each other (a b c mod); to break it, cut one import of each cycle below:",
            "  a -> b -> c -> a",
            "  a -> c -> a",
            "  a -> mod -> a",
            "  the 6 imports among them, and what makes them:",
        ])

        # A directory module (b.rs beside b/): its nodes are inner and other; crate::c leaves it.
        crate_b = find_crate(src / "b")
        check("dir module path", crate_b.mpath, ("b",))
        check("dir module edges", sorted(edges_of(crate_b)), [("inner", "other"), ("other", "inner")])
        out, err = io.StringIO(), io.StringIO()
        check("dir module cycle exit code", report(src / "b", "src/b", out=out, err=err), 1)
        check("dir module cycle", err.getvalue().splitlines()[:3], [
            "CYCLE in the imports of src/b:",
            "cycle 1: 2 modules import each other (inner other); to break it, cut one import of each cycle below:",
            "  inner -> other -> inner",
        ])

        # Without the cycles.
        (src / "c.rs").write_text("pub struct Gamma;\n")
        (src / "b/inner.rs").write_text("use super::super::c::Gamma;\n")
        (src / "a.rs").write_text("use crate::{b::inner::Beta, G};\nuse crate::BoxFuture;\n")
        out, err = io.StringIO(), io.StringIO()
        check("no cycle exit code", report(src, "src", out=out, err=err), 0)
        check("no cycle output", out.getvalue().splitlines(), [
            "imports (module -> module it imports):",
            "  a              -> b",
            "  a              -> c",
            "  b              -> c",
            "  dirmod         -> a",
            "  dirmod         -> c",
            "  dirmod         -> d",
            "layers (each module after the modules it imports):",
            "  0: c d",
            "  1: b",
            "  2: a",
            "  3: dirmod",
            "no cycle",
        ])
        out, err = io.StringIO(), io.StringIO()
        check("dir module without cycle", report(src / "b", "src/b", out=out, err=err), 0)
        check("dir module layers", out.getvalue().splitlines(), [
            "imports (module -> module it imports):",
            "  other          -> inner",
            "layers (each module after the modules it imports):",
            "  0: inner",
            "  1: other",
            "no cycle",
        ])

    # The lexer on its own.
    check("strip", strip("a // c\nb /* x /* y */ z */ \"s\\\"t\" 'c' '\\'' r#\"q\"#\n&'a T").split(),
          ["a", "b", "&'a", "T"])
    check("groups", [show(u.segs) for u in scan("use crate::{a::B, c::{d::E, F}, g};\nuse super::{x::Y, z};")],
          ["crate::a::B", "crate::c::d::E", "crate::c::F", "crate::g", "super::x::Y", "super::z"])
    check("inline", [show(u.segs) for u in scan("let u = crate::budget::Usage { a: super::f::<T>() };")],
          ["crate::budget::Usage", "super::f"])

    for f in failures:
        print("FAIL " + f)
    print(f"self-test: {'FAILED' if failures else 'ok'} ({len(failures)} failure{'s' if len(failures) != 1 else ''})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
