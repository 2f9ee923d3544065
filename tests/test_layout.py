"""The code's places (harness/ modules and groups, agent/, benchmarks/) import one another without
cycles, and the child side of the sandbox never imports what only the parent needs."""
import importlib.util

from conftest import ROOT


def load_import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "benchmarks" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_between_places():
    graph = load_import_graph()
    places, arrows, _ = graph.graph()
    assert {"harness/sandbox", "harness/checks", "harness/suite", "harness/timing"} <= places
    assert graph.cycles(places, arrows) == []


def test_cycle_finder_finds_a_cycle():
    graph = load_import_graph()
    assert graph.cycles({"a", "b", "c"}, {("a", "b"), ("b", "a"), ("b", "c")}) == [["a", "b"]]


def test_the_sandbox_reaches_neither_the_verdict_model_nor_agent():
    """The sandbox child needs only the standard library, torch, triton and numpy: the Verdict model
    (pydantic) and agent/ stay in the parent, so nothing the sandbox imports reaches them."""
    graph = load_import_graph()
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
