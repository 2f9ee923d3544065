"""bbagent as a user installs it: a wheel built from the project, installed (not editable) into a
fresh virtualenv, used from an empty directory that is not the checkout."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BBAGENT_ROOT", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_wheel_installed_in_a_fresh_virtualenv_works_from_an_empty_directory(tmp_path):
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-v",
                  "-w", tmp_path / "dist", ROOT], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    warned = [line for line in (built.stdout + built.stderr).splitlines() if "Warning" in line or "!!" in line]
    assert not warned, warned
    [wheel] = (tmp_path / "dist").glob("bbagent-*.whl")
    # one installed name: everything under bbagent/, nothing else at the top of site-packages (a stale build/
    # folder of an earlier layout in the checkout would add its packages here: remove it)
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
        shipped = {str(Path(name).parent) for name in archive.namelist() if name.endswith("/__init__.py")}
        files = set(archive.namelist())
    # every prompt, its data and its worked examples (prompts/ has no __init__.py: pyproject.toml names each folder)
    prompts = {f"bbagent/agent/prompts/{path.relative_to(ROOT / 'prompts')}" for path in (ROOT / "prompts").rglob("*")
               if path.suffix in (".j2", ".json", ".py")}
    assert prompts <= files, f"prompt files missing from the wheel (add them to pyproject.toml): {sorted(prompts - files)}"
    assert top == {"bbagent", wheel.name.split("-py")[0] + ".dist-info"}, \
        f"the wheel installs {sorted(top)}; a build/ folder left in the checkout by an older layout adds its packages"
    # every package of the checkout is in it (pyproject.toml lists them one by one)
    wanted = {"bbagent/" + str(init.parent.relative_to(ROOT)) for place in ("agent", "harness")
              for init in (ROOT / place).rglob("__init__.py") if "api" not in init.relative_to(ROOT).parts[1:2]}
    assert wanted <= shipped, f"packages missing from the wheel (add them to pyproject.toml): {sorted(wanted - shipped)}"
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", venv], cwd=tmp_path).returncode == 0
    # the torch already installed here (a CPU build from this machine's local file), then the wheel; no .pyc
    # written ahead for all of torch (--no-compile: the install takes 22 s instead of 39 s here; the modules
    # the commands import compile as they are imported)
    torch_pin = f"torch=={torch.__version__.split('+')[0]}"
    installed = _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile",
                      "--disable-pip-version-check", torch_pin, wheel], cwd=tmp_path, timeout=900)
    assert installed.returncode == 0, installed.stderr[-2000:]
    bbagent = venv / "bin" / "bbagent"
    work = tmp_path / "work"
    work.mkdir()

    version = _run([bbagent, "--version"], cwd=work)
    assert version.returncode == 0 and version.stdout.startswith("bbagent 0."), version
    prompt = _run([bbagent, "prompt", "--op", "aten.relu.default"], cwd=work)
    assert prompt.returncode == 0, prompt.stderr
    assert "aten::relu(Tensor self) -> Tensor" in prompt.stdout and "## Worked example" in prompt.stdout
    demo = _run([bbagent, "generate", "--op", "aten.relu.default", "--provider", "replay", "--device", "cpu"], cwd=work)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert (work / "generated_kernels" / "aten.relu.default" / "kernel.py").is_file()
    assert len([p for p in (work / "runs").iterdir() if p.is_dir()]) == 1
    evaluated = _run([bbagent, "eval", "--op", "aten.relu.default", "--device", "cpu"], cwd=work)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "PASS" in evaluated.stdout
    # nothing was written into the installed package or the checkout
    site = next((venv / "lib").glob("python*/site-packages"))
    assert not (site / "runs").exists() and not (site / "generated_kernels").exists()
    probed = _run([venv / "bin" / "python", "-m", "bbagent.harness.device_probe", "--device", "cpu"], cwd=work)
    assert probed.returncode == 0 and '"interpreter":true' in probed.stdout, probed.stderr
    api = _run([venv / "bin" / "python", "-c", "import bbagent; print(bbagent.__version__)"], cwd=work)
    assert api.returncode == 0 and api.stdout.strip() == version.stdout.split()[1], api.stderr


@pytest.mark.slow
def test_the_release_check_passes_on_the_cpu(tmp_path):
    """The CPU twin of the GPU release check (benchmarks/release_check.py): the wheel installed with no
    checkout on sys.path runs generate, review, a batch, status, report, enable() and check-model."""
    log = tmp_path / "release-check.log"
    done = _run([sys.executable, ROOT / "benchmarks" / "release_check.py", "--device", "cpu", "--log", log],
                cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr + (log.read_text()[-4000:] if log.exists() else "")
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines if line.startswith("ok")] == [
        "wheel", "install", "installed", "generate", "review", "batch", "status", "report", "enable", "check-model",
        "program", "package"]
    assert lines[-1].startswith("release check passed on cpu")
