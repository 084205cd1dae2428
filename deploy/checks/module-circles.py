#!/usr/bin/env python3
"""Module circles inside each crate of the workspace: ARCHITECTURE.md's rule
that imports inside a crate run one way.

    python3 deploy/checks/module-circles.py [ROOT]

Prints each circle as `crate: a::b, c::d` (the modules in it) and exits 1 if there is
one; prints nothing and exits 0 otherwise. .ci/run runs it after clippy.

A module is a file under a crate's src/ (src/a/b.rs and src/a/b/mod.rs are
both `a::b`; lib.rs and main.rs the root). A module depends on another when
its text names it by a `crate::` or `super::` path (also inside `use x::{..}`
groups), taking the longest prefix of the path that is a module. A module's
own ancestors and descendants do not count: a parent declares and re-exports
its children. Unit-test files (tests.rs, *_tests.rs) and src/bin are left
out, and so is what follows a `#[cfg(test)] mod`: tests may reach anywhere.
Comments are left out (a doc link is no import). Textual, so approximate: a
path inside a string counts too, which errs on the side of reporting.
"""
import os
import re
import sys

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_]\w*)+)")
GROUP = re.compile(r"\b(crate|super)((?:::[A-Za-z_]\w*)*)::\{")


def workspace_crates(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in ("target", ".git", "fuzz")]
        if "Cargo.toml" in files and os.path.isdir(os.path.join(d, "src")):
            yield d


def crate_modules(src):
    out = {}
    for d, dirs, files in os.walk(src):
        dirs[:] = [x for x in dirs if x != "bin"]
        for f in files:
            if not f.endswith(".rs") or f == "tests.rs" or f.endswith("_tests.rs"):
                continue
            parts = os.path.relpath(os.path.join(d, f), src)[:-3].split(os.sep)
            if parts[-1] == "mod":
                parts.pop()
            if parts in (["lib"], ["main"]):
                parts = []
            out[tuple(parts)] = os.path.join(d, f)
    return out


def group_paths(text, start):
    """The paths inside a `{...}` group beginning at text[start], nested groups expanded."""
    depth, i, item, items = 0, start, "", []
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
            if depth > 1:
                inner, i = group_paths(text, i)
                items.extend(item.strip() + "::" + p if item.strip() else p for p in inner)
                item = ""
                continue
        elif c == "}":
            depth -= 1
            if depth == 0:
                items.append(item.strip())
                return [p for p in items if p and p != "self"], i + 1
        elif c == "," and depth == 1:
            items.append(item.strip())
            item = ""
        elif depth >= 1:
            item += c
        i += 1
    return [p for p in items if p], i


def resolve(module, head, rest, mods):
    base = () if head == "crate" else module[:-1]
    parts = [p for p in rest.split("::") if p]
    while parts and parts[0] == "super":
        base, parts = base[:-1], parts[1:]
    path = base + tuple(parts)
    while path and path not in mods:
        path = path[:-1]
    return path if path in mods else None


def edges(module, text, mods):
    found = set()
    names = [(m.group(1), m.group(2)) for m in PATH.finditer(text)]
    for m in GROUP.finditer(text):
        inner, _ = group_paths(text, m.end() - 1)
        names.extend((m.group(1), m.group(2) + "::" + p) for p in inner)
    for head, rest in names:
        target = resolve(module, head, rest, mods)
        if target is None or target == module:
            continue
        if target[: len(module)] == module or module[: len(target)] == target:
            continue
        found.add(target)
    return found


def circles(graph):
    """Strongly connected sets of two or more modules (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = 0
    for crate in sorted(workspace_crates(root)):
        mods = crate_modules(os.path.join(crate, "src"))
        graph = {}
        for module, path in mods.items():
            with open(path, encoding="utf-8") as f:
                text = f.read()
            text = re.split(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s", text)[0]
            text = re.sub(r"//[^\n]*", "", text)
            graph[module] = edges(module, text, mods)
        for scc in circles(graph):
            bad += 1
            print(f"{os.path.relpath(crate, root)}: " + ", ".join("::".join(m) or "(root)" for m in scc))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
