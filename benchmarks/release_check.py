"""The release check: bbagent as a user installs it, on the GPU machine it is made for.

Builds the wheel from this checkout (or takes ``--wheel``), installs it with ``--no-deps`` into a
fresh target folder (``--deps DIR``: wheels of the packages the machine lacks, installed there too),
and from an empty directory, with nothing but that folder on ``PYTHONPATH`` (no checkout), runs:
``generate`` (replay), ``review approve/list/show``, a 2-operator ``batch`` (replay: the prompt
examples of sigmoid and mul as the answers), ``status``, ``report``, ``bbagent.enable()`` serving
``torch.relu`` on CUDA with ``calls()`` counting, ``check-model --model transformer``, a
KernelBench-format program (``prompt --problem``, ``eval --problem`` of a right and a wrong answer),
and ``export --package``: its wheel installed into a folder of its own and, with only that folder on
``PYTHONPATH`` (no bbagent imported), serving a small model's relu, sigmoid and mul in eager and under
torch.compile, equal to eager. ``--keep-root DIR`` keeps the root (its approved kernels) there. One line
per step; the first failure ends it with exit 1. Every command's output goes to ``--log``.

    python3 benchmarks/release_check.py --deps .whl --log benchmarks/results/<issue>/release-check.log

Without a GPU it runs the same steps on the CPU (``--device cpu``), which CI's packaging test covers.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
RELU = "aten.relu.default"
PROBLEMS = CHECKOUT / "tests" / "problems"  # KernelBench-format problems and answers written for the tests
BATCH_OPS = {"aten.sigmoid.default": "elementwise_unary", "aten.mul.Tensor": "elementwise_binary"}
ENABLE_SCRIPT = """
import json, sys, torch, bbagent
x = torch.randn(4096, device=sys.argv[2])
with bbagent.enable(sys.argv[1], include_slower=True, device=sys.argv[2]) as enabled:
    y = torch.relu(x)
    calls = enabled.calls()
print(json.dumps({"calls": calls.get("aten.relu.default", 0), "correct": bool(torch.equal(y, x.clamp_min(0))),
                  "where": bbagent.__file__}))
"""


PACKAGE_SCRIPT = """
import json, sys, torch
import release_kernels
device = sys.argv[1]
torch.manual_seed(0)
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.gate, self.down = torch.nn.Linear(64, 128), torch.nn.Linear(64, 128), torch.nn.Linear(128, 64)
    def forward(self, x):
        return self.down(torch.relu(self.up(x)) * torch.sigmoid(self.gate(x)))
model, x = Model().to(device), torch.randn(32, 64, device=device)
with torch.no_grad():
    expected = model(x)
    with release_kernels.enable(device=device, include_slower=True) as served:
        eager = model(x)
        eager_calls = dict(served.calls())
        compiled = torch.compile(model)(x)
        calls, sites, paths = served.calls(), served.compiled_sites(), served.under_compile()
print(json.dumps({"bbagent": [name for name in sys.modules if name.split(".")[0] == "bbagent"], "eager_calls": eager_calls,
                  "compiled_calls": {op: calls[op] - eager_calls[op] + sites.get(op, 0) for op in calls}, "paths": paths,
                  "eager": torch.allclose(eager, expected, rtol=1e-5, atol=1e-5),
                  "compiled": torch.allclose(compiled, expected, rtol=1e-4, atol=1e-4), "skipped": served.skipped}))
"""


class StepFailed(Exception):
    pass


class Check:
    def __init__(self, site: Path, work: Path, log: Path, device: str, keep_report: Path | None = None):
        self.site, self.work, self.log, self.device, self.keep_report = site, work, log, device, keep_report
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BBAGENT_ROOT", "TRITON_INTERPRET")}
        self.env["PYTHONPATH"] = str(site)

    def run(self, *argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, *argv], cwd=self.work, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        with self.log.open("a") as log:
            log.write(f"$ python {' '.join(argv)}  (exit {done.returncode}, {time.perf_counter() - started:.1f} s)\n"
                      f"{done.stdout[-6000:]}\n--- stderr ---\n{done.stderr[-6000:]}\n\n")
        return done

    def bbagent(self, *argv: str, expect: int = 0, timeout: float = 900) -> subprocess.CompletedProcess:
        done = self.run("-m", "bbagent", *argv, timeout=timeout)
        if done.returncode != expect:
            tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
            raise StepFailed(f"exit {done.returncode} (wanted {expect}): {' | '.join(tail)}")
        return done


def build_wheel(into: Path) -> Path:
    """``pip wheel`` of this checkout, without build isolation: a GPU machine has no package index,
    and setuptools is installed there."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "--disable-pip-version-check", "-w", str(into), str(CHECKOUT)], capture_output=True, text=True)
    if done.returncode != 0:
        raise StepFailed(f"pip wheel failed: {done.stderr.strip()[-500:]}")
    return next(into.glob("bbagent-*.whl"))


def install(wheel: Path, deps: Path | None, site: Path) -> None:
    wheels = [wheel] + (sorted(deps.glob("*.whl")) if deps else [])
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--disable-pip-version-check", "--target", str(site), *map(str, wheels)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise StepFailed(f"pip install failed: {done.stderr.strip()[-500:]}")


def write_replays(folder: Path) -> None:
    """One replayed answer per batch operator: its family's worked example, which passes its suite."""
    folder.mkdir()
    for op, family in BATCH_OPS.items():
        code = (CHECKOUT / "prompts" / "examples" / f"{family}.py").read_text()
        (folder / f"{op}.json").write_text(json.dumps({"model": "release-check", "exchanges": [
            {"response": f"```python\n{code}```"}]}))


def steps(check: Check) -> list[tuple[str, callable]]:
    device = ["--device", check.device]

    def where_from():
        done = check.run("-c", "import bbagent.agent, bbagent.harness; "
                               "print(bbagent.__file__, bbagent.agent.__file__, bbagent.harness.__file__)")
        paths = done.stdout.split()
        if done.returncode != 0 or not paths or not all(p.startswith(str(check.site / "bbagent")) for p in paths):
            raise StepFailed(f"bbagent is not imported from the install: {done.stdout or done.stderr[-300:]}")
        installed = sorted(p.name for p in check.site.iterdir() if p.name.lower().startswith(("bbagent", "agent", "harness")))
        if [name for name in installed if not name.startswith("bbagent")]:
            raise StepFailed(f"the wheel installs more than bbagent: {installed}")
        return "from " + str(check.site / "bbagent")

    def generate():
        check.bbagent("generate", "--op", RELU, "--provider", "replay", *device)
        if not (check.work / "generated_kernels" / RELU / "kernel.py").is_file():
            raise StepFailed("no generated_kernels/aten.relu.default/kernel.py")
        return "accepted"

    def review():
        check.bbagent("review", "approve", RELU)
        rows = json.loads(check.bbagent("review", "list", "--json").stdout)
        if [(r["op"], r["status"]) for r in rows] != [(RELU, "approved")]:
            raise StepFailed(f"review list says {rows}")
        shown = check.bbagent("review", "show", RELU)  # piped: the kernel file on stdout, the facts on stderr
        kernel = (check.work / "generated_kernels" / RELU / "kernel.py").read_text()
        if "approved" not in shown.stderr or shown.stdout != kernel:
            raise StepFailed("review show does not say approved, or its stdout is not the kernel file")
        return "approved, listed, shown"

    def batch():
        write_replays(check.work / "replays")
        check.bbagent("batch", "--ops", ",".join(BATCH_OPS), "--provider", "replay", "--replay",
                      str(check.work / "replays"), "--rounds", "1", *device, timeout=1800)
        return "2 operators"

    def status():
        said = json.loads(check.bbagent("status", "--json").stdout)
        counts, state = said["counts"], said["liveness"]["state"]
        if counts["accepted"] != 2 or state != "finished":
            raise StepFailed(f"status counts {counts}, batch {state}")
        return f"{counts['accepted']} accepted, batch {state}"

    def report():
        path = Path(check.bbagent("report").stdout.strip().splitlines()[-1])
        if not path.is_file() or path.stat().st_size < 1000:
            raise StepFailed(f"no report at {path}")
        if check.keep_report is not None:
            shutil.copy(path, check.keep_report)
        return f"{path.stat().st_size} bytes"

    def enable():
        done = check.run("-c", ENABLE_SCRIPT, str(check.work), check.device)
        if done.returncode != 0:
            raise StepFailed(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if result["calls"] < 1 or not result["correct"]:
            raise StepFailed(f"enable served {result}")
        return f"torch.relu on {check.device}: {result['calls']} call(s) served, correct"

    def check_model():
        done = check.bbagent("check-model", "--model", "transformer", "--set", "activation=relu", "--set", "layers=1",
                             "--include-slower", "--json", *device, timeout=1800)
        result = json.loads(done.stdout)
        served = result["served"].get(RELU, {}).get("calls", 0)
        if not result["match"] or served < 1:
            raise StepFailed(f"match {result['match']}, relu calls served {served}")
        return f"match, relu served {served} call(s)"

    def program():
        problem = str(PROBLEMS / "level2" / "1_Gemm_ReLU_BiasAdd.py")
        prompt = check.bbagent("prompt", "--problem", problem, *device).stdout
        if "class ModelNew(torch.nn.Module)" not in prompt or "aten.mm.default" not in prompt:
            raise StepFailed("prompt --problem lacks the contract or the program's operators")
        right = json.loads(check.bbagent("eval", "--problem", problem, "--kernel",
                                         str(PROBLEMS / "answers" / "gemm_relu_bias_right.py"), "--json", *device).stdout)
        wrong = json.loads(check.bbagent("eval", "--problem", problem, "--kernel",
                                         str(PROBLEMS / "answers" / "gemm_relu_bias_no_bias.py"), "--json", *device,
                                         expect=1).stdout)
        if wrong["tests"][-1]["error_kind"] != "mismatch":
            raise StepFailed(f"the answer without its bias failed as {wrong['error_kind']}, not by its values")
        return f"prompt, a right answer passed {right['summary']['passed']} draws, one without its bias failed"

    def package():
        for op in BATCH_OPS:
            check.bbagent("review", "approve", op)
        out = check.work / "package"
        check.bbagent("export", "--package", str(out), "--name", "release_kernels")
        check.bbagent("export", "--backendbench", str(check.work / "backendbench"))
        site = check.work / "package-site"
        install(next((out / "dist").glob("release_kernels-*.whl")), None, site)
        # inductor's caches off: a graph compiled before is not traced again, and its launches not counted
        saved, check.env = check.env, {**check.env, "PYTHONPATH": str(site), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
        try:
            done = check.run("-c", PACKAGE_SCRIPT, check.device)
        finally:
            check.env = saved
        if done.returncode != 0:
            raise StepFailed(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        wanted = {RELU, *BATCH_OPS}
        eager = {op for op, n in result["eager_calls"].items() if n}
        compiled = {op for op, n in result["compiled_calls"].items() if n}
        if result["bbagent"] or not (result["eager"] and result["compiled"]) or eager != wanted or compiled != wanted:
            raise StepFailed(f"the package served {result}")
        launched = sum(1 for path in result["paths"].values() if path.startswith("launched"))
        return (f"its wheel, without bbagent: {len(eager)} operators served in eager and compiled ({launched} launched "
                "by inductor's code), equal to eager")

    return [("installed", where_from), ("generate", generate), ("review", review), ("batch", batch),
            ("status", status), ("report", report), ("enable", enable), ("check-model", check_model),
            ("program", program), ("package", package)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, help="a built bbagent wheel (default: build one from this checkout)")
    parser.add_argument("--deps", type=Path, help="a folder of wheels this machine lacks, installed beside it")
    parser.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda where torch sees a GPU")
    parser.add_argument("--log", type=Path, default=Path("release-check.log"))
    parser.add_argument("--keep-report", type=Path, metavar="FILE", help="copy the batch's report.html there")
    parser.add_argument("--keep-root", type=Path, metavar="DIR", help="copy the root (its approved kernels) there")
    args = parser.parse_args()
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    scratch = Path(tempfile.mkdtemp(prefix="bbagent-release-"))
    args.log.parent.mkdir(parents=True, exist_ok=True)
    args.log.write_text(f"bbagent release check, {time.strftime('%Y-%m-%d %H:%M:%S')}, device {device}, "
                        f"torch {torch.__version__}, python {sys.version.split()[0]}\n\n")
    started = time.perf_counter()
    try:
        wheel = args.wheel or build_wheel(scratch / "dist")
        print(f"ok    wheel        {wheel.name}", flush=True)
        install(wheel, args.deps, scratch / "site")
        print(f"ok    install      into {scratch / 'site'}", flush=True)
        (scratch / "work").mkdir()
        check = Check(scratch / "site", scratch / "work", args.log.resolve(), device,
                      args.keep_report.resolve() if args.keep_report else None)
        for name, step in steps(check):
            step_started = time.perf_counter()
            said = step()
            print(f"ok    {name:<12} {said} ({time.perf_counter() - step_started:.1f} s)", flush=True)
        if args.keep_root:
            shutil.copytree(scratch / "work", args.keep_root, symlinks=True, dirs_exist_ok=True)
    except (StepFailed, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
        print(f"FAIL  {locals().get('name', 'setup'):<12} {type(exc).__name__ if not isinstance(exc, StepFailed) else ''}"
              f"{exc}  (log: {args.log})", flush=True)
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"release check passed on {device} in {time.perf_counter() - started:.0f} s (log: {args.log})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
