"""Nsight Compute metrics on request (``bbagent bench --ncu``): achieved DRAM bandwidth, SM
throughput and achieved occupancy of every kernel the candidate (and eager aten) launches on the
largest timed shapes.

ncu has to start the process it profiles, so this runs in a cold sandbox child of its own, started
as ``ncu ... python -m harness.sandbox.child.worker`` after the kernel passed and was timed. Only the
calls inside ``cudaProfilerStart``/``Stop`` are profiled (not the warm-up that compiles and
autotunes), and each call sits in an NVTX range named ``bbagent-<side>-<n>``, by which ncu
renames its kernels: that is how a CSV row finds its shape. That child has no network namespace:
ncu's library, injected into it, reports to the ncu process over 127.0.0.1 (it hangs in a fresh
network namespace; tried on an H200), so there the network is guarded by the audit hook alone.

ncu locks the clocks to base and flushes caches between its replay passes (its defaults), so its
durations are longer than bbagent's timings: read its percentages, not its times, against them.
"""
from __future__ import annotations

import csv
import fcntl
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from bbagent.harness.checks.case import exception_line
from bbagent.harness.events import NcuRange
from bbagent.harness.inputs import clone_value

# (ncu metric, our name): the three the issue names, the kernel's time, and its launch shape
METRICS = {"gpu__time_duration.sum": "time_us",
           "dram__bytes.sum.per_second": "dram_gbs",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
           "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
           "launch__registers_per_thread": "registers"}
RANGE_PREFIX = "bbagent-"
SIDES = ("eager", "kernel")
TIME_UNITS_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
                 "s": 1e6, "second": 1e6}
BYTE_PREFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
CPU_REASON = ("Nsight Compute profiles CUDA kernels: --ncu runs on a CUDA GPU only, after the kernel passed and "
              "was timed")
NOT_FOUND = ("Nsight Compute's command line (ncu) was found neither on PATH nor in $CUDA_HOME/bin or "
             "/usr/local/cuda/bin; install Nsight Compute, or put ncu on PATH")

COUNTERS_FIX = ("the GPU's performance counters are open to administrators only: run as root, or load the driver "
                "with NVreg_RestrictProfilingToAdminUsers=0 (NVIDIA's ERR_NVGPUCTRPERM page says how)")


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "ncu"), os.X_OK):
            return os.path.join(home, "bin", "ncu")
    return None


def command(ncu: str, log_file: Path) -> list[str]:
    """What goes in front of the child's own command line."""
    return [ncu, "--profile-from-start", "off", "--target-processes", "application-only", "--nvtx",
            "--print-nvtx-rename", "kernel", "--csv", "--print-units", "base", "--metrics", ",".join(METRICS),
            "--log-file", str(log_file)]


@contextmanager
def one_at_a_time():
    """Held while ncu runs: one ncu session per machine. Each sandbox child has its own TMPDIR,
    where ncu keeps its own lock, so two evaluations profiling at once (a batch's jobs, or
    generate's profile feedback beside ``bench --ncu``) did not see each other and one ended with
    "Profiling failed" (H200, 8 GPU tests at once). Waits as long as the other session runs."""
    with open(os.path.join(tempfile.gettempdir(), "bbagent-ncu.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def lock_directories() -> list[str]:
    """Where ncu's library in the child takes its interprocess lock when that is not under the
    child's ``TMPDIR`` (its working directory, writable anyway): ``/tmp/nvidia/nsight_compute``,
    made here so that the child's file view can show it writable. Without it ncu stopped with
    InterprocessLockFailed (seen on an H200, in the mount namespace)."""
    path = os.path.join("/tmp", "nvidia", "nsight_compute")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return []
    return [path]


def range_name(side: str, index: int) -> str:
    return f"{RANGE_PREFIX}{side}-{index}"


@contextmanager
def _profiled(name: str, cuda: bool):
    """The calls inside are profiled by ncu, their kernels renamed ``name/...``. Without CUDA (the
    CPU twin of the GPU test, under the Triton interpreter) they only run."""
    if not cuda:
        yield
        return
    import torch
    torch.cuda.nvtx.range_push(name)
    torch.cuda.cudart().cudaProfilerStart()
    try:
        yield
        torch.cuda.synchronize()
    finally:
        torch.cuda.cudart().cudaProfilerStop()
        torch.cuda.nvtx.range_pop()


def profile_cases(op, cases, kernel, send) -> None:
    """In the child: per case, eager aten and the kernel each called once to warm up (compile,
    autotune), then once more between ``cudaProfilerStart`` and ``Stop`` inside its NVTX range."""
    import torch
    cuda = torch.cuda.is_available()
    for index, case in enumerate(cases):
        args, kwargs = case.inputs()
        for side, fn in zip(SIDES, (op, kernel)):
            name = range_name(side, index)
            try:
                warm = clone_value((args, kwargs))
                fn(*warm[0], **warm[1])
                if cuda:
                    torch.cuda.synchronize()
                del warm
                inputs = clone_value((args, kwargs))
                with _profiled(name, cuda):
                    fn(*inputs[0], **inputs[1])
                send(NcuRange(range=name, id=case.id, input=case.description, side=side))
            except Exception as exc:  # noqa: BLE001 - the kernel raised here though it passed: reported
                send(NcuRange(range=name, id=case.id, input=case.description, side=side,
                              error=exception_line(exc, 300)))
        del args, kwargs
        if cuda:
            torch.cuda.empty_cache()


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None  # "n/a" and the like


def _in_our_units(metric: str, unit: str, value: float) -> float:
    if METRICS[metric] == "time_us":
        return value * TIME_UNITS_US.get(unit, 1e-3)
    if METRICS[metric] == "dram_gbs":
        prefix = unit.split("byte")[0] if "byte" in unit else ""
        return value * BYTE_PREFIXES.get(prefix, 1.0) / 1e9
    return value


def parse_csv(text: str) -> dict[str, list[dict]]:
    """ncu's ``--csv`` details page (one row per kernel and metric; its own ``==PROF==`` lines
    mixed in) as kernels per NVTX range: ``{range: [{"name", "block", "grid", time_us, ...}]}``.
    Kernels outside our ranges are listed under ``""``."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(lines):
        metric = row.get("Metric Name")
        if metric not in METRICS or "ID" not in row:
            continue
        entry = kernels.get(row["ID"])
        if entry is None:
            renamed = row.get("Kernel Name") or ""
            scope, _, name = renamed.partition("/") if renamed.startswith(RANGE_PREFIX) else ("", "", renamed)
            entry = kernels[row["ID"]] = {"range": scope, "name": name, "block": row.get("Block Size", ""),
                                          "grid": row.get("Grid Size", "")}
        value = _number(row.get("Metric Value", ""))
        entry[METRICS[metric]] = None if value is None else _in_our_units(metric, row.get("Metric Unit", ""), value)
    by_range: dict[str, list[dict]] = {}
    for key in sorted(kernels, key=lambda k: int(k) if k.isdigit() else 0):
        entry = kernels[key]
        by_range.setdefault(entry.pop("range"), []).append(entry)
    return by_range


def side_totals(kernels: list[dict]) -> dict:
    """One side of one shape: its kernels' time summed; bandwidth as bytes over time; the
    percentages weighted by each kernel's time."""
    timed = [k for k in kernels if k.get("time_us")]
    total = sum(k["time_us"] for k in timed)
    totals = {"time_us": total if timed else None}
    for key in ("dram_gbs", "dram_pct", "sm_pct", "occupancy_pct"):
        known = [k for k in timed if k.get(key) is not None]
        weight = sum(k["time_us"] for k in known)
        totals[key] = sum(k[key] * k["time_us"] for k in known) / weight if weight else None
    return totals


def errors(text: str) -> str:
    """ncu's own ``==ERROR==`` lines, joined (why it profiled nothing, say)."""
    return "; ".join(line.removeprefix("==ERROR==").strip() for line in text.splitlines()
                     if line.startswith("==ERROR=="))[:500]


def per_shape(ranges: list[NcuRange], by_range: dict[str, list[dict]]) -> list[dict]:
    """Per shape (in the order profiled): eager's and the kernel's totals and kernels. ``ranges``
    are the child's ``NcuRange`` events."""
    shapes: dict[str, dict] = {}
    for event in ranges:
        shape = shapes.setdefault(event.id, {"id": event.id, "input": event.input})
        kernels = by_range.get(event.range, [])
        side = {**side_totals(kernels), "kernels": kernels, "error": event.error}
        if side["error"] is None and not kernels:
            side["error"] = "ncu reported no kernel in this call's range"
        shape[event.side] = side
    return list(shapes.values())
