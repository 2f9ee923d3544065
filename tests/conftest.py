import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"
# a subprocess's PYTHONPATH: the checkout (for tests.*), then what this process had (where bbagent is
# installed, on a machine with no editable install)
PYTHONPATH = os.pathsep.join([str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
sys.path.insert(0, str(Path(__file__).resolve().parent))


def load_benchmark(name: str):
    """A script of ``benchmarks/`` (not a package) loaded as a module, for its functions."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def process_state(pid: int) -> str:
    """The process's state letter from /proc ("T" stopped, "Z" a zombie; "" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return ""


def dies_with_parent(signal_number: int = 9) -> None:
    """For ``preexec_fn``: a child started in its own session (so a test can signal its whole group)
    is not signalled when the test run is killed; this asks Linux to send it ``signal_number`` when
    the process that started it ends, so a killed pytest leaves no ``bbagent batch`` running."""
    import ctypes
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal_number, 0, 0, 0)


def pytest_collection_modifyitems(config, items):
    import torch
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine; the CPU twin runs here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def demo_answers() -> list[str]:
    """The shipped replay: a wrong first answer (float32 output) and a right second one."""
    data = json.loads((ROOT / "agent" / "providers" / "replays" / "aten.relu.default.json").read_text())
    return [e["response"] for e in data["exchanges"]]


@pytest.fixture
def no_keys(monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def make_verdict(**fields):
    """A Verdict with defaults for whatever a test does not care about (fields may be nested dicts)."""
    from bbagent.harness.verdict import Verdict
    summary = {"planned": 0, "not_run": 0, "total": 0, "passed": 0, "failed": 0, "reference_errors": 0,
               "skipped": 0, **fields.pop("summary", {})}
    base = {"op": "aten.relu.default", "kernel": {"path": "kernel.py", "sha256": "0" * 64}, "verdict": "fail",
            "seed": 0, "summary": summary}
    return Verdict.model_validate({**base, **fields})


def speed_summary(geomean_speedup: float | None, counted: int = 3) -> dict:
    """A timed kernel's ``PerformanceSummary`` as data, with the figures a test does not care about."""
    return {"correct": True, "timed": counted, "counted": counted, "geomean_speedup": geomean_speedup,
            "speedup_p20": geomean_speedup, "speedup_p50": geomean_speedup, "speedup_p80": geomean_speedup,
            "fast_p": {}, "overhead_dominated": {"count": 0, "geomean_speedup": None}, "memory_bound": True,
            "copy_gbs": None}


def verdict_of(tests: list[dict], verdict: str = "pass", **performance):
    """A Verdict whose performance holds ``tests`` (as the timing phase left them) and ``performance``'s fields."""
    return make_verdict(verdict=verdict, performance={"measured": True, "tests": tests, **performance},
                        environment={"torch": "2.11", "triton": "3.6"})
