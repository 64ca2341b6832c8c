#!/usr/bin/env python3
"""The rooms hold one thing (STYLE.md "Shape"): two rules over the source tree, each failure named.

1. No include cycle between files. A header and its source (x.h, x.cc, x.cu) are one node; a node that
   includes another that includes it back, however far round, is an arrow back up (a subfolder that
   includes the header of the folder that includes it: workers/llm -> workers/executor_registry.h, which
   lists workers/llm).
2. No hand-written source or documentation file over 800 lines (generated files and data are not source):
   a page that long is two pages (bench/README.md and each family's bench/FAMILY/README.md).

    python3 tests/unit/check_tree.py REPO
"""
import os
import re
import sys

ROOTS = ["core", "include", "jobs", "orchestrator", "workers", "storage", "monitoring", "plugins", "bench", "tests",
         "scripts", "docs", "cmake"]
TOP = ["README.md", "CMakeLists.txt"]
CODE = (".h", ".cc", ".cu", ".cuh")
SOURCE = CODE + (".py", ".sh", ".cmake", ".md", ".txt")
MAX_LINES = 800
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def files(repo):
    yield from (name for name in TOP if os.path.isfile(os.path.join(repo, name)))
    for root in ROOTS:
        for dirpath, _, names in os.walk(os.path.join(repo, root)):
            for name in sorted(names):
                yield os.path.relpath(os.path.join(dirpath, name), repo)


def node(path):
    return os.path.splitext(path)[0]


def resolve(repo, including, target):
    """The repository path an #include "target" names: from the repository root, include/, or beside."""
    for base in (repo, os.path.join(repo, "include"), os.path.dirname(os.path.join(repo, including))):
        candidate = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(candidate):
            return os.path.relpath(candidate, repo)
    return None


def cycles(graph):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def main(repo):
    problems = []
    graph, why = {}, {}
    for path in files(repo):
        if path.endswith(SOURCE):
            with open(os.path.join(repo, path), errors="replace") as f:
                text = f.read()
            lines = text.count("\n")
            generated = "generated" in text[:400].lower() and "do not edit" in text[:400].lower()
            if lines > MAX_LINES and not generated:
                problems.append(f"{path}: {lines} lines (at most {MAX_LINES}: split it along a seam a reader would name)")
        if not path.endswith(CODE):
            continue
        me = node(path)
        graph.setdefault(me, set())
        with open(os.path.join(repo, path), errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(repo, path, m.group(1))
                if target is None or node(target) == me:
                    continue
                graph[me].add(node(target))
                why.setdefault((me, node(target)), f"{path}:{number} includes {m.group(1)}")
    for component in cycles(graph):
        members = set(component)
        edges = [why[(a, b)] for a in component for b in sorted(graph[a]) if b in members]
        problems.append("an include cycle between " + ", ".join(component) + ":\n    " + "\n    ".join(edges))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(f"FAIL: {len(problems)} problem(s) in the source tree", file=sys.stderr)
        return 1
    print(f"the tree holds: {len(graph)} code nodes, no include cycle, no hand-written source or page over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
