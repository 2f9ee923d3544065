"""Count the import arrows between the places of the code base, and the import cycles among them.

A place is one module at the top of harness/, one sub-package of harness/ (sandbox, checks, suite,
timing), or the whole of agent/ or benchmarks/. An arrow is "place A imports something from place B"
(A != B), counted once however many imports make it. Imports inside functions count too: they are
dependencies all the same. Run from the checkout: python benchmarks/import_graph.py [--arrows]
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def place_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] in ("agent", "benchmarks", "bbagent"):
        return "agent" if parts[0] == "bbagent" else parts[0]
    if parts[0] != "harness" or len(parts) < 2:
        return None
    return "harness/" + parts[1]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name a file imports (``from a.b import c`` counts as a.b and a.b.c)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def graph() -> tuple[set[str], set[tuple[str, str]], int]:
    files = [p for d in ("agent", "harness", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    known = {module_name(p) for p in files}
    places, arrows = set(), set()
    for path in files:
        source = place_of(module_name(path))
        if source is None:  # harness/__init__.py
            continue
        places.add(source)
        for name in imported_modules(path):
            while name and name not in known and "." in name:  # harness.checks.case.run -> harness.checks.case
                name = name.rsplit(".", 1)[0]
            target = place_of(name) if name in known else None
            if target and target != source:
                arrows.add((source, target))
    return places, arrows, len(files)


def cycles(places: set[str], arrows: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one place (Tarjan)."""
    edges = {p: sorted(b for a, b in arrows if a == p) for p in places}
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(p: str) -> None:
        index[p] = low[p] = len(index)
        stack.append(p)
        on_stack.add(p)
        for q in edges[p]:
            if q not in index:
                visit(q)
                low[p] = min(low[p], low[q])
            elif q in on_stack:
                low[p] = min(low[p], index[q])
        if low[p] == index[p]:
            component = []
            while True:
                q = stack.pop()
                on_stack.discard(q)
                component.append(q)
                if q == p:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for p in sorted(places):
        if p not in index:
            visit(p)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arrows", action="store_true", help="list every arrow")
    args = parser.parse_args()
    places, arrows, files = graph()
    found = cycles(places, arrows)
    print(f"{files} files, {len(places)} places, {len(arrows)} arrows, {len(found)} cycles")
    for component in found:
        print("cycle:", " <-> ".join(component))
    if args.arrows:
        for a, b in sorted(arrows):
            print(f"{a} -> {b}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
