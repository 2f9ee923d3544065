"""``bbagent export --package / --hf-kernels / --backendbench``: approved kernels served where
bbagent is not installed. The wheel built from the README's demo kernel goes into a fresh
virtualenv holding torch, triton and numpy (and what they need) but not bbagent, pydantic or any
LLM SDK, and serves a model there, in eager and under torch.compile, with its outputs equal to
eager's; a kernel judged on another stack is served only after its self-test passed; the
``kernels`` library loads the HF export; BackendBench's loader's rules read the BackendBench one."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import venv
import zipfile
from importlib.metadata import distribution
from pathlib import Path

import pytest
import torch
import triton

from bbagent.agent.review.lifecycle import install, set_status
from bbagent.agent.review.meta import Accepted
from bbagent.cli import main

# what the fresh virtualenv may import besides the standard library: torch, triton, numpy and their needs
CARRIED_DISTRIBUTIONS = ("torch", "triton", "numpy", "filelock", "fsspec", "jinja2", "markupsafe", "mpmath",
                         "networkx", "setuptools", "sympy", "typing_extensions")
ABSENT = ("bbagent", "pydantic", "openai", "anthropic", "tenacity", "rich", "expecttest", "httpx")
RELU_WRONG_HERE = "import torch\n\ndef kernel(self):\n    return torch.clamp(self, min=0.0) + 1e-3\n"
RELU_RIGHT = "import torch\n\ndef kernel(self):\n    return torch.clamp_min(self, 0)\n"


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory) -> Path:
    """A root holding the README's demo kernel (the replayed relu), approved."""
    root = tmp_path_factory.mktemp("demo")
    assert main(["generate", "--op", "aten.relu.default", "--provider", "replay", "--root", str(root)]) == 0
    assert main(["review", "approve", "aten.relu.default", "--root", str(root)]) == 0
    return root


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory) -> Path:
    """A virtualenv's python that sees the standard library, torch, triton and numpy, nothing else."""
    where = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where / "env")
    python = where / "env" / "bin" / "python"
    shared = where / "shared"
    shared.mkdir()
    for name in CARRIED_DISTRIBUTIONS:
        dist = distribution(name)
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (shared / top).exists() and top != "__pycache__":
                (shared / top).symlink_to(source)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "carried.pth").write_text(str(shared) + "\n")
    return python


def _run(python: Path, script: str, cwd: Path, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    environment.update({"XDG_CACHE_HOME": str(cwd / "cache"), **env})
    return subprocess.run([str(python), "-c", textwrap.dedent(script)], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=600)


def test_the_wheel_serves_a_model_where_bbagent_is_not_installed(demo_root, fresh_python, tmp_path, capsys):
    assert main(["export", "--package", str(tmp_path / "project"), "--name", "demo_kernels", "--root",
                 str(demo_root), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    wheel = Path(result["wheel"])
    assert wheel.is_file() and [row["kernel"] for row in result["written"]] == ["aten.relu.default"]
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(fresh_python), "install", "-q",
                                "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    ran = _run(fresh_python, f"""
        import importlib.util, json
        absent = [name for name in {ABSENT!r} if importlib.util.find_spec(name) is not None]
        import torch
        import demo_kernels
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8), torch.nn.ReLU())
        x = torch.randn(4, 16)
        with torch.no_grad():
            expected = model(x)
            with demo_kernels.enable() as served:
                eager = model(x)
                eager_calls = served.calls()["aten.relu.default"]
                compiled = torch.compile(model)(x)
                compiled_calls = served.calls()["aten.relu.default"] - eager_calls
                paths = served.under_compile()
            after = demo_kernels.disable()
            model(x)
        print(json.dumps({{"absent": absent, "eager_calls": eager_calls, "compiled_calls": compiled_calls,
                          "eager_equal": torch.equal(eager, expected), "compiled_equal": torch.equal(compiled, expected),
                          "kernels": demo_kernels.kernels(), "after": after, "served": list(served.served),
                          "paths": paths}}))
        """, tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    facts = json.loads(ran.stdout.splitlines()[-1])
    assert facts["absent"] == [], facts
    assert facts["eager_calls"] == 2 and facts["compiled_calls"] == 2, facts
    assert facts["eager_equal"] and facts["compiled_equal"], facts
    assert facts["served"] == ["aten.relu.default", "aten.relu_.default", "aten.relu.out"]
    assert facts["paths"] == {"aten.relu.default": "an extern call out of inductor's code"}  # the CPU: no launches
    kernel = facts["kernels"][0]
    assert kernel["judged_on"]["torch"] == torch.__version__ and kernel["judged_on"]["triton"] == triton.__version__
    assert kernel["verdict"]["tests"]["passed"] == kernel["verdict"]["tests"]["total"] > 0
    assert len(kernel["sha256"]) == 64 and facts["after"] is None  # left by the with block already
    listed = _run(fresh_python, "import runpy, sys; sys.argv = ['x', 'list']; runpy.run_module('demo_kernels', "
                                "run_name='__main__')", tmp_path)
    assert "aten.relu.default v1 approved" in listed.stdout, listed.stderr


def _approved(root: Path, source: str, torch_version: str = torch.__version__) -> Path:
    op = "aten.relu.default"
    install(root, source, Accepted.model_validate({
        "op": op, "written_for": op, "serves": [op, "aten.relu_.default", "aten.relu.out"], "run_id": "test",
        "tests": {"passed": 1, "total": 1}, "versions": {"torch": torch_version, "triton": triton.__version__},
        "device": "cpu", "dtypes": ["float32"], "performance": {"measured": False}}))
    set_status(root / "generated_kernels" / op, "approved")
    return root


def _package(root: Path, out: Path, name: str, **judged_on) -> Path:
    """The package of ``root``'s kernels; ``judged_on``: as if the package had landed on another
    stack than the one that judged them (its manifest says they were judged on that one)."""
    assert main(["export", "--package", str(out), "--name", name, "--root", str(root), "--json"]) == 0
    manifest = out / name / "manifest.json"
    document = json.loads(manifest.read_text())
    for kernel in document["kernels"]:
        kernel["judged_on"].update(judged_on)
    manifest.write_text(json.dumps(document))
    return out


SERVE = """
    import json, torch, {name}
    served = {name}.enable(device="cpu"{options})
    torch.relu(torch.randn(8))
    print(json.dumps({{"calls": served.calls(), "skipped": served.skipped}}))
    """


def test_a_kernel_judged_on_another_stack_is_served_after_its_self_test_passes_here(tmp_path, capsys):
    project = _package(_approved(tmp_path / "root", RELU_RIGHT), tmp_path / "project", "elsewhere",
                       torch="2.0.0")
    capsys.readouterr()
    python, cwd = Path(sys.executable), tmp_path
    first = _run(python, SERVE.format(name="elsewhere", options=""), cwd, PYTHONPATH=str(project))
    assert first.returncode == 0, first.stderr
    facts = json.loads(first.stdout.splitlines()[-1])
    assert facts["calls"] == {} and "judged on torch 2.0.0" in facts["skipped"]["aten.relu.default"]
    assert "python -m elsewhere check" in first.stderr
    checked = _run(python, "import runpy, sys; sys.argv = ['x', 'check']; runpy.run_module('elsewhere', "
                           "run_name='__main__')", cwd, PYTHONPATH=str(project))
    assert checked.returncode == 0 and "aten.relu.default: passed" in checked.stdout, checked.stdout + checked.stderr
    again = _run(python, SERVE.format(name="elsewhere", options=""), cwd, PYTHONPATH=str(project))
    assert json.loads(again.stdout.splitlines()[-1])["calls"] == {"aten.relu.default": 1, "aten.relu_.default": 0,
                                                                   "aten.relu.out": 0}, again.stderr


def test_the_self_test_refuses_a_kernel_whose_check_fails_here(tmp_path, capsys):
    project = _package(_approved(tmp_path / "root", RELU_WRONG_HERE), tmp_path / "project", "wrong", triton="0.0.1")
    capsys.readouterr()
    python, cwd = Path(sys.executable), tmp_path
    checked = _run(python, "import runpy, sys; sys.argv = ['x', 'check']; runpy.run_module('wrong', "
                           "run_name='__main__')", cwd, PYTHONPATH=str(project))
    assert checked.returncode == 1 and "aten.relu.default: FAILED" in checked.stdout, checked.stdout + checked.stderr
    refused = _run(python, SERVE.format(name="wrong", options=", check=True"), cwd, PYTHONPATH=str(project))
    facts = json.loads(refused.stdout.splitlines()[-1])
    assert facts["calls"] == {} and "its self-test failed" in facts["skipped"]["aten.relu.default"]
    trusted = _run(python, SERVE.format(name="wrong", options=", trust=True"), cwd, PYTHONPATH=str(project))
    assert json.loads(trusted.stdout.splitlines()[-1])["calls"]["aten.relu.default"] == 1  # the user said so


def test_the_exported_project_builds_the_same_package_with_pip(demo_root, tmp_path, capsys):
    """``pip wheel DIR`` of the project (its pyproject.toml) packs what bbagent's own wheel packs."""
    assert main(["export", "--package", str(tmp_path / "project"), "--name", "built", "--root", str(demo_root)]) == 0
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                           str(tmp_path / "pip"), str(tmp_path / "project")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]

    def files(wheel: Path) -> set[str]:
        with zipfile.ZipFile(wheel) as archive:
            return {name for name in archive.namelist() if ".dist-info/" not in name}
    ours = files(next((tmp_path / "project" / "dist").glob("*.whl")))
    assert files(next((tmp_path / "pip").glob("*.whl"))) == ours
    assert {"built/manifest.json", "built/kernels/aten_relu_default/kernel.py", "built/_runtime/packaged.py",
            "built/selftest/aten_relu_default.pt"} <= ours


def test_a_packaged_file_changed_after_export_is_not_served(tmp_path, capsys):
    project = _package(_approved(tmp_path / "root", RELU_RIGHT), tmp_path / "project", "edited")
    kernel = project / "edited" / "kernels" / "aten_relu_default" / "kernel.py"
    kernel.write_text(kernel.read_text() + "\n# edited\n")
    ran = _run(Path(sys.executable), SERVE.format(name="edited", options=""), tmp_path, PYTHONPATH=str(project))
    facts = json.loads(ran.stdout.splitlines()[-1])
    assert facts["calls"] == {} and "is not the file approved" in facts["skipped"]["aten.relu.default"]


def test_the_hf_kernels_export_loads_with_the_kernels_library(demo_root, tmp_path, capsys):
    out = tmp_path / "hf"
    assert main(["export", "--hf-kernels", str(out), "--name", "demo_hf", "--root", str(demo_root)]) == 0
    assert (out / "build" / "torch-universal" / "metadata.json").is_file()
    ran = _run(Path(sys.executable), f"""
        import json
        from pathlib import Path
        import torch
        from kernels import get_local_kernel
        module = get_local_kernel(Path({str(out)!r}))
        with module.enable(device="cpu") as served:
            y = torch.relu(torch.tensor([-1.0, 2.0]))
        print(json.dumps({{"y": y.tolist(), "calls": served.calls(), "keys": [k["key"] for k in module.kernels()]}}))
        """, tmp_path, HF_HUB_OFFLINE="1")
    assert ran.returncode == 0, ran.stderr[-3000:]
    facts = json.loads(ran.stdout.splitlines()[-1])
    assert facts == {"y": [0.0, 2.0], "calls": {"aten.relu.default": 1, "aten.relu_.default": 0, "aten.relu.out": 0},
                     "keys": ["aten.relu.default"]}


def test_the_backendbench_export_is_what_its_directory_backend_loads(demo_root, tmp_path, capsys):
    out = tmp_path / "ops"
    assert main(["export", "--backendbench", str(out), "--root", str(demo_root), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == ["relu__default"]
    files = [p.name for p in (out / "relu__default").iterdir() if re.fullmatch(r"relu__default_implementation.*\.py",
                                                                                 p.name)]
    assert files == ["relu__default_implementation_v1.py"]
    assert {row["overload"] for row in result["left_out"] if "overload" in row} == {"aten.relu_.default",
                                                                                     "aten.relu.out"}
    ran = _run(Path(sys.executable), f"""
        import importlib.util, torch
        spec = importlib.util.spec_from_file_location("op_relu__default", {str(out / "relu__default" / files[0])!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(module.relu__default_kernel_impl(torch.tensor([-1.0, 3.0])).tolist())
        """, tmp_path, TRITON_INTERPRET="1")
    assert ran.stdout.strip() == "[0.0, 3.0]", ran.stderr[-2000:]


@pytest.mark.parametrize("argv, words", [
    (["--package", "{tmp}/p", "--name", "my-kernels"], "is not a Python identifier"),
    (["--package", "{tmp}/p", "--name", "class"], "is not a Python identifier"),
    (["--package", "{tmp}/p"], "needs --name NAME"),
    (["--hf-kernels", "{file}/sub", "--name", "ok"], "cannot write into"),
    (["--package", "{file}", "--name", "ok"], "is not a folder"),
])
def test_bad_input_exits_2_with_the_fix(argv, words, demo_root, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    argv = [a.format(tmp=tmp_path, file=tmp_path / "file") for a in argv]
    assert main(["export", *argv, "--root", str(demo_root)]) == 2
    assert words in capsys.readouterr().err


def test_with_no_approved_kernel_nothing_is_exported_and_it_exits_2(tmp_path, capsys):
    root = _approved(tmp_path / "root", RELU_RIGHT)
    set_status(root / "generated_kernels" / "aten.relu.default", "needs_review")
    assert main(["export", "--package", str(tmp_path / "p"), "--name", "k", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "no kernel to export" in err and "--include-unreviewed" in err
    assert not (tmp_path / "p" / "dist").exists()
    assert main(["export", "--package", str(tmp_path / "p"), "--name", "k", "--root", str(root),
                 "--include-unreviewed", "--json"]) == 0


def test_a_stale_kernel_is_not_exported_and_the_message_names_review_verify(tmp_path, capsys):
    root = _approved(tmp_path / "root", RELU_RIGHT, torch_version="2.0.0")  # judged under another torch: stale
    assert main(["export", "--package", str(tmp_path / "p"), "--name", "k", "--root", str(root)]) == 2
    assert "'bbagent review verify aten.relu.default' judges a stale one here again" in capsys.readouterr().err


def test_every_module_a_package_carries_imports_no_other_bbagent_code():
    from bbagent.agent.review.package import CARRIED, carried_source
    for module in CARRIED:
        text = carried_source(module)
        assert not re.search(r"^\s*(from|import) bbagent\b", text, re.M), module
        assert importlib.util.find_spec(module) is not None


def test_a_helion_kernel_is_packaged_with_helion_as_a_requirement_and_served_on_the_cpu(tmp_path, capsys):
    """A kernel written in Helion (meta.json's dsl) is exported with its language: the manifest says so,
    the wheel and the project require helion beside torch and triton, and the package serves it (the CPU:
    Helion's Triton under the interpreter)."""
    root = tmp_path / "root"
    op = "aten.relu.default"
    install(root, (Path(__file__).parent / "kernels" / "relu_helion.py").read_text(), Accepted.model_validate({
        "op": op, "written_for": op, "serves": [op], "run_id": "test", "dsl": "helion",
        "tests": {"passed": 1, "total": 1}, "versions": {"torch": torch.__version__, "triton": triton.__version__},
        "device": "cpu", "dtypes": ["float32"], "performance": {"measured": False}}))
    set_status(root / "generated_kernels" / op, "approved")
    project = _package(root, tmp_path / "project", "helion_kernels")
    capsys.readouterr()
    assert json.loads((project / "helion_kernels" / "manifest.json").read_text())["kernels"][0]["dsl"] == "helion"
    assert 'dependencies = ["torch", "triton", "helion"]' in (project / "pyproject.toml").read_text()
    wheel = next((project / "dist").glob("*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read("helion_kernels-0.1.0.dist-info/METADATA").decode()
    assert "Requires-Dist: helion" in metadata, metadata
    served = _run(Path(sys.executable), """
import json, torch, helion_kernels
served = helion_kernels.enable(device="cpu")
x = torch.randn(1000)
y = torch.relu(x)
print(json.dumps({"calls": served.calls(), "equal": bool(torch.equal(y, x.clamp_min(0)))}))
""", tmp_path, PYTHONPATH=str(project))
    assert served.returncode == 0, served.stderr[-2000:]
    facts = json.loads(served.stdout.splitlines()[-1])
    assert facts["equal"] and facts["calls"].get(op) == 1, facts
