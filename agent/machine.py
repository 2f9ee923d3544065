"""This machine, as bbagent's results depend on it: torch, triton, the GPU model and the harness.

One description used everywhere a result is tied to where it was made: a batch's resume key
(``agent.batch.start``), an approved kernel turning stale (``agent.review.lifecycle``) and a Ray
node's supervisor reporting what it runs (``agent.batch.ray_executor``). The GPU model comes
from the driver (``nvidia-smi``, else ``/proc/driver/nvidia``), so asking never initialises CUDA
in this process.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from bbagent.harness.interface import harness_fingerprint, triton_version  # noqa: F401  (agent.machine.harness_fingerprint, as before)

UNKNOWN_GPU = "unknown GPU"


@dataclass(frozen=True)
class Machine:
    torch: str
    triton: str
    gpu: str | None  # the GPU model; None where no NVIDIA GPU is visible
    suite: str       # harness_fingerprint(): what a kernel is tested with

    def as_dict(self) -> dict:
        return asdict(self)


def gpu_model(physical: str | None = None) -> str:
    """The name of the first GPU (or of the GPU of that physical index), from the driver."""
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
                               + ([f"--id={physical}"] if physical is not None else []), capture_output=True,
                               text=True, timeout=30).stdout.split("\n")
        if names[0].strip():
            return names[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        for line in info.read_text().splitlines():
            if line.startswith("Model:"):
                return line.split(":", 1)[1].strip()
    return UNKNOWN_GPU


def visible_gpu() -> str | None:
    """The model of this process's first visible NVIDIA GPU, or None (none installed, or hidden by
    an empty ``CUDA_VISIBLE_DEVICES``)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x") in ("", "-1"):
        return None
    if not (shutil.which("nvidia-smi") or Path("/proc/driver/nvidia/gpus").is_dir()):
        return None
    found = gpu_model()
    return None if found == UNKNOWN_GPU else found


@lru_cache(maxsize=1)
def this_machine() -> Machine:
    import torch
    return Machine(torch=torch.__version__, triton=triton_version(), gpu=visible_gpu(), suite=harness_fingerprint())


def this_process() -> dict:
    """Who is running, as recorded where a process may die without a word (a batch's coordinator,
    a run): host, pid and start time, for :func:`process_state` to read back."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started_at": round(time.time(), 3)}


def process_state(record: dict | None) -> str:
    """Whether the process of a :func:`this_process` record is ``alive`` or ``dead`` (it ran on
    this host: its pid is checked, and a pid reused by a later process counts as dead), or
    ``unknown`` (another host, or no record)."""
    record = record or {}
    pid = record.get("pid")
    if record.get("host") != socket.gethostname() or not pid:
        return "unknown"
    if pid == os.getpid():
        return "alive"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        pass
    try:  # a process of that number started after the recorded one did is another one
        if os.stat(f"/proc/{pid}").st_ctime > (record.get("started_at") or 0) + 5:
            return "dead"
    except OSError:
        pass
    return "alive"
