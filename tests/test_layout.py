"""The import rules of DESIGN.md ("Layers"), stated as import-linter contracts in pyproject.toml,
hold on the real tree and catch each kind of break planted in a copy of it; docs/layout.md is the
generated one."""
import ast
import os
import shutil
import subprocess
import sys

from conftest import ROOT, load_benchmark

LINT_IMPORTS = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or shutil.which("lint-imports")


def lint_imports(tree, where):
    """import-linter's report on ``tree`` (a checkout's root), staged as the installed package under
    ``where``; the contracts are the real pyproject.toml's."""
    staged = load_benchmark("staged_tree").stage(where, tree)
    result = subprocess.run([LINT_IMPORTS, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=staged,
                            env={**os.environ, "PYTHONPATH": str(staged)}, capture_output=True, text=True, timeout=300)
    return result.returncode, " ".join((result.stdout + result.stderr).split())


def copy_of_the_tree(where):
    """agent/, harness/ and prompts/ copied under ``where``; returns ``plant(relative_path, code)``,
    which appends code to one of the copied files."""
    for folder in ("agent", "harness", "prompts"):
        shutil.copytree(ROOT / folder, where / folder, ignore=shutil.ignore_patterns("__pycache__"))

    def plant(relative: str, code: str) -> None:
        path = where / relative
        path.write_text(path.read_text() + "\n\n" + code + "\n")
    return plant


def test_the_real_tree_keeps_every_contract(tmp_path):
    code, report = lint_imports(ROOT, tmp_path)
    assert code == 0, report
    contracts = load_benchmark("layout").contracts()
    assert len(contracts) >= 7
    for contract in contracts:
        assert f"{contract['name']} KEPT" in report, (contract["name"], report)
    assert "0 broken" in report


def test_each_contract_catches_a_break_planted_inside_a_function(tmp_path):
    """Each rule, broken in a copy of the tree by an import inside a function: an upward import, the
    public API imported from below, harness importing agent, a sibling of a layer, a second door
    into harness, the sandbox's sides, pydantic reached from the child, and a circle. Each contract
    is reported broken; the real tree keeps them all (above)."""
    tree = tmp_path / "tree"
    plant = copy_of_the_tree(tree)
    planted = {
        "the public API on top, then agent/, then harness/":
            ("harness/ops.py", "import bbagent.agent.storage"),
        "agent/'s packages keep their layers":
            ("agent/machine.py", "from bbagent.agent.batch import ledger"),
        "harness/'s packages keep their layers":
            ("harness/traces.py", "from bbagent.harness import evaluate"),
        "agent/ reaches harness/ through harness.interface alone":
            ("agent/storage.py", "from bbagent.harness.verdict import Verdict"),
        "the sandbox's child and parent sides never import each other":
            ("harness/sandbox/parent/run.py", "from ..child import compile_clock"),
        "the sandbox's child side reaches neither pydantic, the Verdict model, evaluate nor agent/":
            ("harness/sandbox/child/forkserver.py", "import pydantic"),
        "no circle among the modules of any package":
            ("agent/generate/extract.py", "from bbagent.agent.generate import loop"),
    }
    for relative, code in planted.values():
        plant(relative, "def planted():\n    " + code + "\n    return None")
    returned, report = lint_imports(tree, tmp_path / "staged")
    assert returned != 0
    for name in planted:
        assert f"{name} BROKEN" in report, (name, report)


def test_a_module_named_in_no_layer_is_reported(tmp_path):
    tree = tmp_path / "tree"
    copy_of_the_tree(tree)
    (tree / "agent" / "newcomer.py").write_text('"""A module nobody placed."""\n')
    returned, report = lint_imports(tree, tmp_path / "staged")
    assert returned != 0 and "newcomer" in report, report


def test_every_import_is_one_import_linter_can_see():
    """import-linter reads import statements only: a module imported by a literal name through
    importlib or __import__ would pass its contracts unseen. Only the two lazy doors do it, and the
    names they load are real imports for the checkers (the public package's table is of its own
    modules; harness.interface's is its TYPE_CHECKING imports)."""
    doors = {ROOT / "agent" / "api" / "__init__.py", ROOT / "harness" / "interface.py"}
    found = []
    for folder in ("agent", "harness"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and path not in doors:
                    func = node.func
                    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                    if called in ("import_module", "__import__") and node.args \
                            and isinstance(node.args[0], ast.Constant):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_facade_loads_each_name_from_the_module_its_import_names():
    """harness.interface's table is its TYPE_CHECKING block; each name comes, on first use, from the
    module that block imports it from, under the name the block gives it."""
    import importlib
    from bbagent.harness import interface
    assert len(interface._HOME_OF) > 90
    assert interface._HOME_OF["make_workdir"] == ("bbagent.harness.workdirs", "make")
    for name, (module, attribute) in interface._HOME_OF.items():
        assert getattr(interface, name) is getattr(importlib.import_module(module), attribute), name


def test_docs_layout_is_the_generated_one():
    """docs/layout.md is written by `python benchmarks/layout.py`: every module of agent/ and
    harness/, in its layer, with its docstring's first sentence."""
    assert (ROOT / "docs" / "layout.md").read_text() == load_benchmark("layout").layout_text(), \
        "docs/layout.md is out of step: run python benchmarks/layout.py"


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


# Where an import inside a function is the point: the public package and the command line (importing
# bbagent and `bbagent --help` load neither torch nor pydantic), the modules every command loads
# before it parses its arguments, the one that loads an LLM SDK only for its provider, the Ray
# supervisor (its methods run on other nodes), serving (on the CPU it turns Triton's interpreter on
# before anything imports triton) and the entry points of child processes, which start light.
# Everywhere else a module says what it depends on at its top.
LATE_IMPORTS_ALLOWED = ("agent/api/", "agent/generate/progress.py", "agent/money.py", "agent/options.py",
                        "agent/reports/console.py", "agent/serving/check_model.py", "agent/providers/__init__.py",
                        "agent/batch/ray_executor.py", "agent/serving/enable.py", "agent/serving/load.py",
                        "agent/serving/check_model_child.py", "harness/interface.py", "harness/sandbox/child/",
                        "harness/device_probe/__main__.py")


def test_modules_import_bbagent_and_the_standard_library_at_their_top():
    """Third-party packages (torch, triton, ray, rich, ...) may still be imported where used: a
    module that light commands load must not pay for them."""
    late = []
    for path in sorted([*(ROOT / "agent").rglob("*.py"), *(ROOT / "harness").rglob("*.py")]):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(LATE_IMPORTS_ALLOWED):
            continue
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                    if module and module.split(".")[0] in {"bbagent", *sys.stdlib_module_names}:
                        late.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert late == [], "imports inside functions (move them to the module's top):\n" + "\n".join(late)
