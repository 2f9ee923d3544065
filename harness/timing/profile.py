"""Profiles on request (``bbagent bench --profile``, and generate's optimisation rounds): after
timing, a torch profiler trace (Chrome trace JSON, CPU and CUDA activity) of eager aten and one of
the kernel, on each of the largest timed shapes (a program: of ``Model`` and ``ModelNew`` on its
inputs); the inductor baseline's child lists the kernels of torch.compile's code the same way. Written by the sandbox child into its working directory (the one place it may
write); the parent moves them into the run directory (``harness.evaluate``).
"""
from __future__ import annotations

import os
import re

from bbagent.harness.inputs import clone_value

DIRECTORY = "profiles"
CALLS = 5  # profiled calls per side, after one warm-up call


def _file_stem(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", case_id)


def profile_case(op, case, kernel, workdir: str) -> tuple[list[str], dict]:
    """Trace files (relative to ``workdir``) of eager and of the kernel on ``case``'s inputs, and
    each side's GPU kernels per call (``launches``)."""
    args, kwargs = case.inputs()
    sides = {}
    for side, fn in (("eager", op), ("kernel", kernel)):
        inputs = clone_value((args, kwargs))
        sides[side] = lambda fn=fn, inputs=inputs: fn(*inputs[0], **inputs[1])
    return profile_sides(sides, case.id, workdir)


def profile_sides(sides: dict, stem: str, workdir: str | None) -> tuple[list[str], dict]:
    """Each side (its name: a call of no arguments) called once, then ``CALLS`` times under the
    torch profiler: its trace file (``profiles/<stem>-<side>.trace.json`` under ``workdir``, none
    without one) and its GPU activity per call (``launches_per_call``), by side."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    if workdir is not None:
        os.makedirs(os.path.join(workdir, DIRECTORY), exist_ok=True)
    written, launches = [], {}
    for side, call in sides.items():
        call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as recorded:
            for _ in range(CALLS):
                call()
            torch.cuda.synchronize()
        if workdir is not None:
            name = os.path.join(DIRECTORY, f"{_file_stem(stem)}-{side}.trace.json")
            recorded.export_chrome_trace(os.path.join(workdir, name))
            written.append(name)
        launches[side] = launches_per_call(recorded.events(), CALLS)
    return written, launches


def launches_per_call(recorded, calls: int) -> list[dict]:
    """The GPU activity (kernels, copies, memsets) of ``calls`` profiled calls, per call: name,
    microseconds and launches each, the costliest first."""
    by_name: dict[str, list[float]] = {}
    for event in recorded:
        if str(event.device_type).endswith("CUDA"):
            by_name.setdefault(event.name, []).append(float(event.time_range.elapsed_us()))
    rows = [{"name": name, "us": round(sum(times) / calls, 3), "per_call": round(len(times) / calls, 2)}
            for name, times in by_name.items()]
    return sorted(rows, key=lambda row: -row["us"])


def largest(results: list[dict], count: int) -> list[str]:
    """Ids of the ``count`` timed shapes that move the most bytes."""
    timed = [r for r in results if not r.get("error_kind")]
    return [r["id"] for r in sorted(timed, key=lambda r: -r["bytes"])[:count]]


def pick(results: list[dict], count: int, how: str = "largest") -> list[str]:
    """Ids of ``count`` timed shapes to profile: the ``largest``, or those ``furthest`` from their
    roofline, measured as the time the kernel takes above the roofline's floor (a shape of a few
    microseconds at 0% of its roofline has less to give than a large one at 30%; the order of
    ``Performance.furthest_from_roof``), among shapes not dominated by launch overhead where there
    are such; the largest where no floor is known."""
    if how != "furthest":
        return largest(results, count)
    timed = [r for r in results if not r.get("error_kind") and r.get("floor_ms") is not None
             and (r.get("candidate") or {}).get("median_ms") is not None]
    counted = [r for r in timed if not r.get("overhead_dominated")] or timed
    if not counted:
        return largest(results, count)
    return [r["id"] for r in sorted(counted, key=lambda r: r["floor_ms"] - r["candidate"]["median_ms"])[:count]]
