#!/usr/bin/env python3
"""Module dependency cycles inside each crate of the workspace.

usage: scripts/module-cycles.py [ROOT] [-v]    (ROOT: the repository, by default
                                                the parent of this script's folder)

Cargo forbids a cycle between crates; this checks the same rule one level down,
between the modules of one crate (docs/ARCHITECTURE.md, "Invariants and their
owners": no module imports back up a layer).

How:
- a crate is a folder with a Cargo.toml and a src/ (target/, fuzz/, node_modules/
  and .git/ are not walked); its modules come from the files under src/
  (src/hub/mod.rs -> hub, src/hub/topics.rs -> hub::topics, src/lib.rs -> the
  root); src/bin/ and test-only modules (a `tests` segment) are left out;
- in each file, comments, string literals and `#[cfg(test)]` items are removed
  first (a doc link names a module without depending on it);
- every path that starts with `crate::` or `super::` (in a `use`, braces
  expanded, or in code) is an edge to the longest module it names; when the
  name after that module is one of that module's `pub use` re-exports, the edge
  goes on to where the re-export comes from (so `crate::Limits`, re-exported
  by lib.rs from `limits`, is an edge to `limits`);
- an edge between a module and its own ancestor or descendant is ignored: a
  parent declares its children, and an `impl Hub` split over hub/*.rs reaches
  `super::` by design.

Prints each cycle (a strongly connected component of two or more modules) with
one edge of it per line and the line that makes it, then the count. Exits 1 when
there is a cycle, 0 otherwise.
"""
import os
import re
import sys

SKIP_DIRS = {"target", ".git", "fuzz", "node_modules"}
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
PATH_RE = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super)(?:\s*::\s*(?:super|" + IDENT + r"))+)")
USE_RE = re.compile(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);")
VIS_IN_RE = re.compile(r"pub\s*\(\s*in\s+[^)]*\)")


def raw_start(text, i):
    """Whether the `r` at `i` starts a raw string (`r"`, `r#"`, `br"`), not
    the end of an identifier (`bar"` cannot occur, `for"` neither)."""
    j = i - 1 if i > 0 and text[i - 1] == "b" else i
    return j == 0 or not (text[j - 1].isalnum() or text[j - 1] == "_")


def strip_code(text):
    """The text with comments, string and char literals blanked (newlines kept,
    so line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
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
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 300]) and raw_start(text, i):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), else a lifetime.
            m = re.match(r"'(?:\\(?:u\{[0-9A-Fa-f]+\}|x[0-9A-Fa-f]{2}|.)|[^\\'])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_cfg_test(code):
    """Removes each item under `#[cfg(test)]` (a `mod x;`, or an item with a
    braced body), keeping its newlines."""
    out, i = [], 0
    pat = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
    while True:
        m = pat.search(code, i)
        if not m:
            out.append(code[i:])
            return "".join(out)
        out.append(code[i:m.start()])
        j = m.end()
        # The item ends at its first top-level `;` or at the `}` closing its
        # first `{`.
        depth = 0
        while j < len(code):
            ch = code[j]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            elif ch == ";" and depth == 0:
                j += 1
                break
            j += 1
        out.append("\n" * code.count("\n", m.start(), j))
        i = j


def split_top(s, sep=","):
    """`s` split on `sep` outside braces."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def expand_use(tree):
    """`a::{b, c::{d, e as f}}` -> [(path, alias)]: ([a, b], b), ([a, c, d], d),
    ([a, c, e], f). `self` in braces names the prefix itself."""
    tree = re.sub(r"\s+", " ", tree).strip()
    if tree.startswith("::"):
        tree = tree[2:]
    i = tree.find("{")
    if i < 0:
        alias = None
        m = re.match(r"(.*?)\s+as\s+(" + IDENT + r")$", tree)
        if m:
            tree, alias = m.group(1), m.group(2)
        path = [p.strip() for p in tree.split("::") if p.strip()]
        if not path:
            return []
        if path[-1] == "self":
            path = path[:-1]
        if not path or path[-1] == "*":
            return [(path[:-1] if path and path[-1] == "*" else path, None)]
        return [(path, alias or path[-1])]
    prefix = [p.strip() for p in tree[:i].split("::") if p.strip()]
    inner = tree[i + 1:tree.rfind("}")]
    res = []
    for part in split_top(inner):
        for path, alias in expand_use(part):
            res.append((prefix + path, alias))
    return res


def mod_path(src, f):
    rel = os.path.relpath(f, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def crates(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        if "Cargo.toml" in files and os.path.isdir(os.path.join(d, "src")):
            yield d


def absolute(path, me, mods):
    """A path (a list of segments) that starts with `crate`, `super`, `self` or
    a child module of `me` (a `use` in 2018 edition) as a tuple from the crate
    root, or None (another crate's, or a name in scope)."""
    if path and path[0] == "self":
        return tuple(me) + tuple(path[1:])
    if path and tuple(me) + (path[0],) in mods:
        return tuple(me) + tuple(path)
    if not path or path[0] not in ("crate", "super"):
        return None
    if path[0] == "crate":
        return tuple(path[1:])
    base = list(me)
    k = 0
    while k < len(path) and path[k] == "super":
        if not base:
            return None
        base.pop()
        k += 1
    return tuple(base) + tuple(path[k:])


class Crate:
    def __init__(self, dir_):
        self.dir = dir_
        src = os.path.join(dir_, "src")
        self.files = {}
        for d, dirs, fs in os.walk(src):
            dirs[:] = sorted(dirs)
            for f in sorted(fs):
                if f.endswith(".rs"):
                    p = os.path.join(d, f)
                    m = mod_path(src, p)
                    if (m and m[0] == "bin") or "tests" in m or m[-1:] == ("tests",):
                        continue
                    self.files[m] = p
        self.mods = set(self.files)
        self.code = {}
        self.reexports = {}  # module -> {name: absolute target path}
        for m, p in self.files.items():
            with open(p, encoding="utf-8", errors="replace") as fh:
                code = strip_cfg_test(strip_code(fh.read()))
            code = VIS_IN_RE.sub("pub", code)
            self.code[m] = code
            table = {}
            for u in USE_RE.finditer(code):
                if not u.group(1):
                    continue
                for path, alias in expand_use(u.group(2)):
                    target = absolute(path, m, self.mods)
                    if target is not None and alias:
                        table[alias] = target
            self.reexports[m] = table

    def resolve(self, path, depth=0):
        """The module an absolute path lands in, following re-exports."""
        for k in range(len(path), -1, -1):
            head = path[:k]
            if head in self.mods:
                rest = path[k:]
                if rest and depth < 8:
                    target = self.reexports.get(head, {}).get(rest[0])
                    if target is not None and target != path:
                        return self.resolve(target + rest[1:], depth + 1)
                return head
        return None

    def edges(self):
        """{module: {other module: line number of the first reference}}."""
        graph = {}
        for me, code in self.code.items():
            out = {}
            refs = []
            for u in USE_RE.finditer(code):
                line = code.count("\n", 0, u.start()) + 1
                for path, _ in expand_use(u.group(2)):
                    refs.append((path, line))
            for p in PATH_RE.finditer(code):
                line = code.count("\n", 0, p.start()) + 1
                refs.append(([s.strip() for s in p.group(1).split("::")], line))
            for path, line in refs:
                target = absolute(path, me, self.mods)
                if target is None:
                    continue
                best = self.resolve(target)
                if best is None or best == me:
                    continue
                if best[:len(me)] == me or me[:len(best)] == best:
                    continue
                out[best] = min(line, out.get(best, line))
            graph[me] = out
        return graph


def sccs(graph):
    """Tarjan's strongly connected components of two or more nodes."""
    index, low, stack, on, res = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                res.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return res


def name(m):
    return "::".join(m) or "(root)"


def main(argv):
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    total, n_crates, n_mods, n_edges = 0, 0, 0, 0
    for c in crates(root):
        crate = Crate(c)
        graph = crate.edges()
        rel = os.path.relpath(c, root)
        n_crates += 1
        n_mods += len(graph)
        n_edges += sum(len(v) for v in graph.values())
        if verbose:
            for me in sorted(graph):
                for other, line in sorted(graph[me].items()):
                    print(f"{rel}: {name(me)} -> {name(other)} ({os.path.relpath(crate.files[me], root)}:{line})")
        for comp in sccs(graph):
            total += 1
            members = set(comp)
            print(f"{rel}: cycle of {len(comp)} modules: {', '.join(name(m) for m in comp)}")
            for me in comp:
                for other, line in sorted(graph[me].items()):
                    if other in members:
                        print(f"  {name(me)} -> {name(other)}  ({os.path.relpath(crate.files[me], root)}:{line})")
    print(f"module cycles: {total} ({n_crates} crates, {n_mods} modules, {n_edges} edges)")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
