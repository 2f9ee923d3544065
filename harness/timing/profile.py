"""Profiles on request (``bbagent bench --profile``): after timing, a torch profiler trace (Chrome
trace JSON, CPU and CUDA activity) of eager aten and one of the kernel, on each of the largest
timed shapes. Written by the sandbox child into its working directory (the one place it may
write); the parent moves them into the run directory (``harness.evaluate``).
"""
from __future__ import annotations

import os
import re

from harness.inputs import clone_value

DIRECTORY = "profiles"
CALLS = 5  # profiled calls per side, after one warm-up call


def _file_stem(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", case_id)


def profile_case(op, case, kernel, workdir: str) -> list[str]:
    """Trace files (relative to ``workdir``) of eager and of the kernel on ``case``'s inputs."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    os.makedirs(os.path.join(workdir, DIRECTORY), exist_ok=True)
    args, kwargs = case.inputs()
    written = []
    for side, fn in (("eager", op), ("kernel", kernel)):
        inputs = clone_value((args, kwargs))
        fn(*inputs[0], **inputs[1])
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as recorded:
            for _ in range(CALLS):
                fn(*inputs[0], **inputs[1])
            torch.cuda.synchronize()
        name = os.path.join(DIRECTORY, f"{_file_stem(case.id)}-{side}.trace.json")
        recorded.export_chrome_trace(os.path.join(workdir, name))
        written.append(name)
    return written


def largest(results: list[dict], count: int) -> list[str]:
    """Ids of the ``count`` timed shapes that move the most bytes."""
    timed = [r for r in results if not r.get("error_kind")]
    return [r["id"] for r in sorted(timed, key=lambda r: -r["bytes"])[:count]]
