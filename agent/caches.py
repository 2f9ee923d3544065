"""What bbagent keeps between runs outside ``runs/`` and ``generated_kernels/``, listed and cleared
(``bbagent cache``): the built suites (``harness.suite.cache``: up to 200, new keys after every
harness change), the Triton kernels the candidates compiled, the timing cache of eager measurements
(``ROOT/runs/reference_timings.sqlite``), the GPU's probed facts the prompts state
(``agent.gpu_facts``), and the working folders of processes that ended without
removing them (``harness.workdirs``: a ``kill -9``). Clearing never touches what a live process uses:
a working folder is removed only once its process is gone.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from bbagent.agent import gpu_facts
from bbagent.agent.errors import UsageError
from bbagent.harness.interface import (TIMING_CACHE_FILE as FILE_NAME, orphaned_workdirs, remove_orphaned_workdirs,
                                       size_of, suite_cache_dir, triton_cache_dir)

CACHES = ("suites", "triton", "timing", "devices", "workdirs")


@dataclass
class Cache:
    name: str
    path: str
    entries: int
    bytes: int
    what: str

    def row(self) -> dict:
        return asdict(self)


def _timing_file(root: Path) -> Path:
    return root / "runs" / FILE_NAME


def _folder(name: str, path: Path, what: str, pattern: str = "*") -> Cache:
    entries = list(path.glob(pattern)) if path.is_dir() else []
    return Cache(name, str(path), len(entries), size_of(path) if path.is_dir() else 0, what)


def caches(root: Path) -> list[Cache]:
    """Every cache, with where it is, how many entries it holds and their bytes."""
    timing = _timing_file(root)
    orphans = orphaned_workdirs()
    return [
        _folder("suites", suite_cache_dir(), "each operator's tests, built once per operator, options, torch, triton "
                "and harness", "*.pt"),
        _folder("triton", triton_cache_dir(), "the kernels the candidates compiled (Triton's own cache)"),
        Cache("timing", str(timing), 1 if timing.is_file() else 0, timing.stat().st_size if timing.is_file() else 0,
              "eager aten's timings and the GPU's yardsticks, reused by later runs (--no-cache ignores them)"),
        _folder("devices", gpu_facts.facts_cache_dir(), "the GPU's facts the first prompt states, probed once per GPU model, "
                "torch and Triton", "*.json"),
        Cache("workdirs", tempfile.gettempdir(), len(orphans), sum(size_of(p) for p in orphans),
              "working folders of bbagent processes that ended without removing them"),
    ]


def clear(root: Path, which: list[str], dry_run: bool = False) -> list[Cache]:
    """Empty the caches named (``CACHES``, or "all"); what was (or would be) removed."""
    names = list(CACHES) if "all" in which else which
    unknown = [n for n in names if n not in CACHES]
    if unknown:
        raise UsageError(f"unknown cache {', '.join(unknown)}: choose from {', '.join(CACHES)} or all")
    removed = []
    for cache in caches(root):
        if cache.name not in names:
            continue
        removed.append(cache)
        if dry_run:
            continue
        if cache.name == "workdirs":
            remove_orphaned_workdirs()
        elif cache.name == "timing":
            Path(cache.path).unlink(missing_ok=True)
        else:
            shutil.rmtree(cache.path, ignore_errors=True)
    return removed
