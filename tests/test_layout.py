"""The code's places (harness/ modules and groups, agent/, benchmarks/) import one another without
cycles, and the child side of the sandbox never imports what only the parent needs."""

from conftest import ROOT, load_benchmark


def copy_of_the_tree(where):
    """agent/ and harness/ copied under ``where``; returns ``plant(relative_path, code)``, which
    appends code to one of the copied files."""
    import shutil
    for folder in ("agent", "harness"):
        shutil.copytree(ROOT / folder, where / folder, ignore=shutil.ignore_patterns("__pycache__"))

    def plant(relative: str, code: str) -> None:
        path = where / relative
        path.write_text(path.read_text() + "\n\n" + code + "\n")
    return plant


def test_no_import_cycle_between_places():
    graph = load_benchmark("import_graph")
    places, arrows, _ = graph.graph()
    assert {"harness/sandbox", "harness/checks", "harness/suite", "harness/timing"} <= places
    assert graph.cycles(places, arrows) == []


def test_cycle_finder_finds_a_cycle():
    graph = load_benchmark("import_graph")
    assert graph.cycles({"a", "b", "c"}, {("a", "b"), ("b", "a"), ("b", "c")}) == [["a", "b"]]


def test_the_sandbox_reaches_neither_the_verdict_model_nor_agent():
    """The sandbox child needs only the standard library, torch, triton and numpy: the Verdict model
    (pydantic) and agent/ stay in the parent, so nothing the sandbox imports reaches them."""
    graph = load_benchmark("import_graph")
    _, arrows, _ = graph.graph()
    reached, todo = set(), ["harness/sandbox"]
    while todo:
        place = todo.pop()
        reached.add(place)
        todo += [b for a, b in arrows if a == place and b not in reached]
    assert not {"harness/verdict", "harness/evaluate", "agent"} & reached, sorted(reached)
    for place in reached:
        path = ROOT / place
        for file in path.rglob("*.py") if path.is_dir() else [path.with_suffix(".py")]:
            assert "pydantic" not in graph.imported_modules(file), file


def test_every_import_in_agent_and_harness_keeps_the_rules():
    """No module below agent/api imports the public API, harness/ never imports agent/, no circle of
    modules, and agent/'s packages keep their layers (imports inside functions counted too)."""
    graph = load_benchmark("import_graph")
    edges = graph.module_graph()
    assert {"agent.api", "agent.batch.start", "agent.review.catalog", "harness.evaluate"} <= set(edges)
    assert graph.rule_breaks(edges) == []


def test_the_import_rules_catch_planted_breaks(tmp_path):
    """A copy of the tree with an upward import inside a function, harness importing agent, a layer
    broken and a circle: each is reported."""
    graph = load_benchmark("import_graph")
    plant = copy_of_the_tree(tmp_path)
    plant("agent/review/catalog.py", "def planted():\n    from bbagent import UsageError\n    return UsageError")
    plant("harness/ops.py", "def planted():\n    import bbagent.agent.storage\n    return bbagent.agent.storage")
    plant("agent/machine.py", "from bbagent.agent.batch import ledger")
    plant("agent/errors.py", "def planted():\n    from bbagent.agent.storage import write_json\n    return write_json")
    breaks = graph.rule_breaks(graph.module_graph(tmp_path))
    assert any(b.startswith("agent.review.catalog imports the public API agent.api") for b in breaks), breaks
    assert "harness.ops imports agent.storage: harness/ never imports agent/" in breaks
    assert any(b.startswith("agent.machine imports agent.batch.ledger, a layer above it") for b in breaks), breaks
    assert "import circle: agent.errors <-> agent.storage" in breaks
    planted = ("agent.review.catalog ", "harness.ops ", "agent.machine ", "agent.errors ", "import circle")
    assert all(b.startswith(planted) for b in breaks), breaks  # nothing else: the real tree keeps the rules


def test_every_spelling_of_an_import_is_caught_in_agent_and_in_harness(tmp_path):
    """Issue 48 (point 5): a relative import, importlib.import_module and __import__ of a literal
    name passed the rules before, and harness/ had no layers. Each, planted in a copy of the tree,
    is reported; the real tree keeps the rules."""
    graph = load_benchmark("import_graph")
    plant = copy_of_the_tree(tmp_path)
    plant("agent/batch/ledger.py", "def planted():\n    from .runner import Batch\n    return Batch")  # a sibling
    plant("agent/review/meta.py", "def planted():\n    import importlib\n"
                                  "    return importlib.import_module('bbagent.agent.reports.html')")
    plant("agent/storage.py", "def planted():\n    return __import__('bbagent.agent.batch.ledger')")
    plant("agent/families.py", "def planted():\n    from importlib import import_module\n"
                               "    return import_module('.ledger', package='bbagent.agent.batch')")
    plant("harness/ops.py", "def planted():\n    from .suite import build\n    return build")
    plant("harness/traces.py", "def planted():\n    import importlib\n"
                               "    return importlib.import_module('bbagent.harness.evaluate')")
    plant("harness/checks/compare.py", "def planted():\n    return __import__('bbagent.harness.sandbox.child.worker')")
    breaks = graph.rule_breaks(graph.module_graph(tmp_path))
    assert any(b.startswith("import circle:") and "agent.batch.ledger" in b and "agent.batch.runner" in b
               for b in breaks), breaks  # runner imports the ledger: the relative import back closes a circle
    expected = ("agent.review.meta imports agent.reports.html, a layer above it",  # importlib.import_module
                "agent.storage imports agent.batch.ledger, a layer above it",  # __import__
                "agent.families imports agent.batch.ledger, a layer above it",  # import_module relative, package=
                "harness.ops imports harness.suite.build, a layer above it",  # relative, in harness/
                "harness.traces imports harness.evaluate, a layer above it",
                "harness.checks.compare imports harness.sandbox.child.worker, a layer above it")
    for start in expected:
        assert any(b.startswith(start) for b in breaks), (start, breaks)
    assert graph.rule_breaks(graph.module_graph()) == []


def test_the_sandbox_sides_import_only_what_their_own_process_runs(tmp_path):
    """Issue 48 (point 4): the child side (harness/sandbox/child/, run in the sandboxed process) and
    the parent side (harness/sandbox/parent/) share only harness/sandbox/'s own modules (the job,
    process groups, paths); an import across, in either direction and however spelled, is reported."""
    graph = load_benchmark("import_graph")
    edges = graph.module_graph()
    child = {m for m in edges if m.startswith("harness.sandbox.child.")}
    parent = {m for m in edges if m.startswith("harness.sandbox.parent.")}
    assert {"harness.sandbox.child.worker", "harness.sandbox.child.forkserver"} <= child
    assert {"harness.sandbox.parent.run", "harness.sandbox.parent.pool"} <= parent
    assert not any(edges[m] & parent for m in child) and not any(edges[m] & child for m in parent)
    plant = copy_of_the_tree(tmp_path)
    plant("harness/sandbox/child/forkserver.py", "def planted():\n    from bbagent.harness.sandbox.parent.pool import Pool\n"
                                                 "    return Pool")
    plant("harness/sandbox/parent/run.py", "def planted():\n    from ..child import compile_clock\n    return compile_clock")
    breaks = graph.rule_breaks(graph.module_graph(tmp_path))
    assert ("harness.sandbox.child.forkserver imports harness.sandbox.parent.pool: the sandbox's child side never "
            "imports its parent side") in breaks, breaks
    assert ("harness.sandbox.parent.run imports harness.sandbox.child.compile_clock: the sandbox's parent side never "
            "imports its child side") in breaks, breaks


def test_agent_reaches_the_harness_through_its_one_door(tmp_path):
    """Issue 61: agent/ imports exactly one module of harness/, harness.interface, whose table of
    names counts as its imports; a direct import of another, planted, is reported."""
    graph = load_benchmark("import_graph")
    edges = graph.module_graph()
    reached = {t for m, targets in edges.items() if m.startswith("agent") for t in targets if t.startswith("harness")}
    assert reached == {"harness.interface"}
    assert {"harness.evaluate", "harness.verdict", "harness.problem"} <= edges["harness.interface"]
    plant = copy_of_the_tree(tmp_path)
    plant("agent/storage.py", "def planted():\n    from bbagent.harness.verdict import Verdict\n    return Verdict")
    breaks = graph.rule_breaks(graph.module_graph(tmp_path))
    assert breaks == ["agent.storage imports harness.verdict: agent/ imports harness/ only through harness.interface"]


def test_docs_layout_is_the_generated_one():
    """docs/layout.md is written by `python benchmarks/import_graph.py --write-layout`: every module
    of agent/ and harness/, in its layer, with its docstring's first sentence."""
    graph = load_benchmark("import_graph")
    assert (ROOT / "docs" / "layout.md").read_text() == graph.layout_text(), \
        "docs/layout.md is out of step: run python benchmarks/import_graph.py --write-layout"


def test_every_name_imported_from_bbagent_exists():
    """A renamed function still imported by its old name inside a function (or on a GPU-only path)
    fails only when that path runs; here every ``from bbagent... import name`` in agent/, harness/,
    tests/ and benchmarks/ is checked against the module it names, whether or not the path runs."""
    import ast
    import importlib
    missing = []
    for folder in ("agent", "harness", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if {"results", "kernels", "faults"} & set(path.relative_to(ROOT).parts):
                continue  # measured scripts kept as they ran; candidate kernels
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("bbagent")):
                    continue
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if not hasattr(module, alias.name) and importlib.util.find_spec(f"{node.module}.{alias.name}") is None:
                        missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.module} has no {alias.name}")
    assert missing == []
