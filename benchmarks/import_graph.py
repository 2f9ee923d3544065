"""The import graph of agent/ and harness/, and the rules it must keep.

Two views. Places: one module at the top of harness/, one sub-package of harness/ (sandbox, checks,
suite, timing), or the whole of agent/ or benchmarks/; an arrow is "place A imports something from
place B". Modules: every module of agent/ and harness/ (the public API package ``bbagent`` is
agent/api/). Imports inside functions count in both: they are dependencies all the same, and so
does every spelling of one: relative imports, ``importlib.import_module`` and ``__import__`` of a
literal name (``imported_modules``).

The rules (``rule_breaks``): no module outside agent/api/ imports the public API (``bbagent`` or
``agent.api``); harness/ never imports agent/, and agent/ imports harness/ through its one door,
``harness.interface`` (whose table of names, imported on first use, counts as its imports); the sandbox's child side (harness/sandbox/child/, what
the sandboxed process runs) and its parent side (harness/sandbox/parent/) never import each other,
only what they share from harness/sandbox/; no circle of modules; and the packages of agent/ and
of harness/ keep the layers of ``LAYERS``: a module imports only from its own package or from a
lower layer, never from a sibling of its layer; a module in no layer is named.

It also writes docs/layout.md (``--write-layout``): every module of agent/ and harness/, layer by
layer, with the first line of its docstring; ``tests/test_layout.py`` keeps that file in step.

    python benchmarks/import_graph.py [--arrows] [--modules] [--check] [--write-layout]
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = "agent.api"  # installed as the package bbagent
FACADE = "harness.interface"  # the one module of harness/ that agent/ imports; it names its modules in a table
SANDBOX = "harness.sandbox"  # its child/ runs in the sandboxed process, its parent/ in the evaluating one
# agent/'s packages and top modules, top layer first; harness/'s below them all
LAYERS = (
    ("agent.api",),
    ("agent.reports",),
    ("agent.batch",),
    ("agent.generate", "agent.bench", "agent.serving"),
    ("agent.regions",),
    ("agent.judging", "agent.providers"),
    ("agent.review",),
    ("agent.caches",),
    ("agent.run_record", "agent.gpu_facts"),
    ("agent.families", "agent.machine", "agent.models", "agent.money", "agent.options", "agent.storage"),
    ("agent.errors",),
    # harness/, below agent/: its one door, then evaluate over the request over the sandbox over timing over the
    # problem over checks over suite over the leaves
    ("harness.interface",),
    ("harness.selfcheck", "harness.device_probe"),
    ("harness.evaluate",),
    ("harness.request",),
    ("harness.after_tests",),
    ("harness.assemble",),
    ("harness.sandbox",),
    ("harness.timing",),
    ("harness.program_facts", "harness.program_sizes"),
    ("harness.problem",),
    ("harness.checks", "harness.coverage"),
    ("harness.adapters", "harness.suite"),
    ("harness.variants",),
    ("harness.inputs", "harness.layouts"),
    ("harness.events", "harness.fingerprint", "harness.gpu_pause", "harness.nvml", "harness.opinfo_index",
     "harness.ops", "harness.plain", "harness.redact", "harness.stopwatch", "harness.traces", "harness.verdict",
     "harness.workdirs"),
    ("harness.error_kinds", "harness.parse"),
)


def place_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] in ("agent", "benchmarks", "bbagent"):
        return "agent" if parts[0] == "bbagent" else parts[0]
    if parts[0] != "harness" or len(parts) < 2:
        return None
    return "harness/" + parts[1]


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def imported_modules(path: Path, module: str | None = None) -> set[str]:
    """Every module name a file imports, however it is spelled: ``import a.b``; ``from a.b import c``
    (a.b and a.b.c); a relative ``from .x import y`` or ``from .. import z``, resolved against the
    file's package (``module``, its dotted name; by default read from its path under ROOT); and
    ``importlib.import_module("a.b")``, ``import_module(".x", "pkg")`` or ``__import__("a.b")`` of
    a literal name."""
    if module is None:
        try:
            module = module_name(path)
        except ValueError:  # a file outside the tree: its relative imports cannot be placed
            module = None
    package = None if module is None else module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module if node.level == 0 else _relative(package, node.level, node.module)
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            dynamic = _dynamic_import(node)
            if dynamic:
                names.add(dynamic)
        elif module == FACADE and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith("bbagent.harness."):  # its table: module -> the names it lends
            names.add(node.value)
    return names


def _relative(package: str | None, level: int, name: str | None) -> str | None:
    """``from <level dots><name>`` inside ``package``, as an absolute name."""
    if not package:
        return None
    parts = package.split(".")
    if level - 1 >= len(parts):
        return None
    base = parts[:len(parts) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _dynamic_import(call: ast.Call) -> str | None:
    """The literal module name of ``importlib.import_module(...)``, ``import_module(...)`` or
    ``__import__(...)``; a relative one with its literal package (``import_module(".x", "a")``)."""
    func = call.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if called not in ("import_module", "__import__") or not call.args:
        return None
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    name = first.value
    if called == "import_module" and name.startswith("."):
        given = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "package"),
                                                              None)
        if not (isinstance(given, ast.Constant) and isinstance(given.value, str)):
            return None
        dots = len(name) - len(name.lstrip("."))
        return _relative(given.value, dots, name[dots:] or None)
    return name


def graph() -> tuple[set[str], set[tuple[str, str]], int]:
    files = [p for d in ("agent", "harness", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    known = {module_name(p) for p in files}
    places, arrows = set(), set()
    for path in files:
        source = place_of(module_name(path))
        if source is None:  # harness/__init__.py
            continue
        places.add(source)
        for name in map(source_name, imported_modules(path, module_name(path))):
            while name and name not in known and "." in name:  # harness.checks.case.run -> harness.checks.case
                name = name.rsplit(".", 1)[0]
            target = place_of(name) if name in known else None
            if target and target != source:
                arrows.add((source, target))
    return places, arrows, len(files)


def source_name(imported: str) -> str:
    """An imported name as the module's place in the source tree: the installed ``bbagent.agent.x``
    and ``bbagent.harness.x`` as ``agent.x`` and ``harness.x``, the public API ``bbagent`` (and
    ``bbagent.cli``) as ``agent.api``; any other name as it is."""
    for installed, source in (("bbagent.agent", "agent"), ("bbagent.harness", "harness"), ("bbagent", PUBLIC)):
        if within(imported, installed):
            return source + imported.removeprefix(installed)
    return imported


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of agent/ and harness/ it imports, by their names in the source tree
    (``source_name``)."""
    files = {module_name(p, root): p for d in ("agent", "harness") for p in (root / d).rglob("*.py")}
    edges = {}
    for name, path in files.items():
        targets = set()
        for imported in map(source_name, imported_modules(path, name)):
            while imported not in files and "." in imported:
                imported = imported.rsplit(".", 1)[0]
            if imported in files and imported != name:
                targets.add(imported)
        edges[name] = targets
    return edges


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


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_of(module: str) -> tuple[int, str] | None:
    """(layer index, package) of a module, or None for one no layer names."""
    for number, packages in enumerate(LAYERS):
        for package in packages:
            if within(module, package):
                return number, package
    return None


def rule_breaks(edges: dict[str, set[str]]) -> list[str]:
    """Every import that breaks a rule (module docstring), and every circle, in words."""
    found = []
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            if within(target, PUBLIC) and not within(source, PUBLIC):
                found.append(f"{source} imports the public API {target} (bbagent): move what it needs below it")
            elif within(source, "harness") and within(target, "agent"):
                found.append(f"{source} imports {target}: harness/ never imports agent/")
            elif within(source, "agent") and within(target, "harness") and target != FACADE:
                found.append(f"{source} imports {target}: agent/ imports harness/ only through {FACADE}")
            elif _other_side(source, target):
                found.append(f"{source} imports {target}: {_other_side(source, target)}")
            elif source != "harness":  # the package's own __init__ is in no layer
                found += _layer_break(source, target)
    for module in sorted(m for m, targets in edges.items() if not targets and m not in ("agent", "harness")):
        found += [] if layer_of(module) is not None else [  # one that imports something is named above
            f"{module} is in no layer of benchmarks/import_graph.py LAYERS: add its package there"]
    for circle in cycles(set(edges), {(a, b) for a, targets in edges.items() for b in targets}):
        found.append("import circle: " + " <-> ".join(circle))
    return found


def _other_side(source: str, target: str) -> str | None:
    """Why ``source`` may not import ``target`` across the sandbox's process boundary, or None:
    each side imports only what its own process runs, and what both share from harness.sandbox."""
    for mine, theirs in (("child", "parent"), ("parent", "child")):
        if within(source, f"{SANDBOX}.{mine}") and within(target, f"{SANDBOX}.{theirs}"):
            return f"the sandbox's {mine} side never imports its {theirs} side"
    return None


def _layer_break(source: str, target: str) -> list[str]:
    mine, theirs = layer_of(source), layer_of(target)
    if mine is None:
        return [f"{source} is in no layer of benchmarks/import_graph.py LAYERS: add its package there"]
    if theirs is None or mine[1] == theirs[1] or theirs[0] > mine[0]:
        return []
    where = "a sibling of its layer" if theirs[0] == mine[0] else "a layer above it"
    return [f"{source} imports {target}, {where} ({theirs[1]} over {mine[1]})"]


LAYOUT_FILE = ROOT / "docs" / "layout.md"
LAYOUT_HEAD = """# Layout of the code

Generated by `python benchmarks/import_graph.py --write-layout` from the modules' own docstrings;
`tests/test_layout.py` fails when it is out of step. A wheel installs `agent/api/` as the package
`bbagent`, `agent/` as `bbagent.agent`, `harness/` as `bbagent.harness` and `prompts/` as
`bbagent.agent.prompts`. The layers run top first: a module imports only from its own package or
a lower layer, agent/ reaches harness/ only through `harness/interface.py`, and the sandbox's
child and parent sides never import each other (DESIGN.md, "Layers").
Beside the code: `prompts/` (the Jinja templates and worked examples), `generated_kernels/` and
`runs/` (what bbagent writes, each with a README), `tests/` (CPU tests; GPU tests marked `gpu`),
`benchmarks/` (GPU measurements, their results, and `release_check.py`).
"""


def summary_line(path: Path) -> str:
    """The first sentence of a module's docstring, on one line (empty where it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    end = first.find(". ")
    return first[:end + 1] if end >= 0 else first


def layout_text(root: Path = ROOT) -> str:
    """docs/layout.md: per layer, each package's modules with their docstrings' first sentences."""
    files = sorted(p for d in ("agent", "harness") for p in (root / d).rglob("*.py"))
    modules = {path: module_name(path, root) for path in files}
    said = {path: summary_line(path) for path in files}
    lines = [LAYOUT_HEAD]
    for number, packages in enumerate(LAYERS, start=1):
        lines.append(f"## Layer {number}: {', '.join(packages)}\n")
        for package in packages:
            for path in files:
                if path.name == "__init__.py" and not said[path]:  # an empty package marker
                    continue
                if layer_of(modules[path]) == (number - 1, package):
                    lines.append(f"- `{path.relative_to(root)}`" + (f": {said[path]}" if said[path] else ""))
        lines.append("")
    unplaced = [p for p in files if layer_of(modules[p]) is None]
    if unplaced:
        lines.append("## In no layer\n")
        lines += [f"- `{p.relative_to(root)}`: {said[p]}".rstrip(": ") for p in unplaced]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arrows", action="store_true", help="list every arrow between places")
    parser.add_argument("--modules", action="store_true", help="list every module with what it imports")
    parser.add_argument("--check", action="store_true", help="exit 1 where a rule is broken")
    parser.add_argument("--write-layout", action="store_true", help=f"write {LAYOUT_FILE.relative_to(ROOT)}")
    args = parser.parse_args()
    if args.write_layout:
        LAYOUT_FILE.write_text(layout_text())
        print(f"wrote {LAYOUT_FILE}")
    places, arrows, files = graph()
    found = cycles(places, arrows)
    print(f"{files} files, {len(places)} places, {len(arrows)} arrows, {len(found)} cycles")
    for component in found:
        print("cycle:", " <-> ".join(component))
    if args.arrows:
        for a, b in sorted(arrows):
            print(f"{a} -> {b}")
    edges = module_graph()
    if args.modules:
        for module, targets in sorted(edges.items()):
            print(f"{module}: {', '.join(sorted(targets))}")
    breaks = rule_breaks(edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports between them, {len(breaks)} rule breaks")
    for line in breaks:
        print("rule:", line)
    return 1 if args.check and breaks else 0


if __name__ == "__main__":
    raise SystemExit(main())
