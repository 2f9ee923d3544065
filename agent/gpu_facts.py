"""The facts of this machine's GPU that the first prompt states (``prompts/device.j2``): probed once
per GPU model, torch and Triton in a process of its own (``python -m bbagent.harness.device_probe``,
about 20 s; this process never initialises CUDA) and kept in a per-user cache. On the CPU, or where
the probe fails, there are none and the prompt says nothing about the device.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from bbagent.agent.machine import visible_gpu
from bbagent.harness.interface import PROBE_FORMAT, DeviceFacts
from bbagent.harness.interface import triton_version

PROBE_TIMEOUT_S = 300
_lock = threading.Lock()
_failed: dict[str, str] = {}  # cache key -> why the probe failed, so a batch asks once per process
_uncached: dict[str, DeviceFacts | None] = {}  # facts probed where the cache folder cannot be written


def facts_cache_dir() -> Path:
    return Path(os.environ.get("BBAGENT_DEVICE_CACHE") or Path(tempfile.gettempdir()) / f"bbagent-devices-{os.getuid()}")


@lru_cache(maxsize=1)
def _gpu() -> str | None:
    """The model of the GPU evaluations run on, asked of the driver once per process (``nvidia-smi``
    is a process of its own, and every run and prompt asks)."""
    return visible_gpu()


def cache_file(gpu: str) -> Path:
    import torch
    key = "|".join((gpu, torch.__version__, triton_version(), str(PROBE_FORMAT)))
    return facts_cache_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"


def cached_facts(gpu: str) -> DeviceFacts | None:
    """The facts probed earlier for this GPU model and stack, or None (never probed, or unreadable)."""
    try:
        facts = DeviceFacts.model_validate_json(cache_file(gpu).read_text())
    except (OSError, ValidationError):
        return None
    return facts if facts.gpu is not None else None


def facts_for(device: str | None, probe: bool = True) -> DeviceFacts | None:
    """The probed facts of the GPU that evaluations on ``device`` run on: cached, else probed now
    (``probe``; one probe at a time across threads and processes); None on the CPU, where no NVIDIA
    GPU is visible, or where the probe failed (``probe_failure`` says why)."""
    if device != "cuda":
        return None
    gpu = _gpu()
    if gpu is None:
        return None
    path = cache_file(gpu)
    found = cached_facts(gpu) or _uncached.get(path.name)
    if found is not None or not probe:
        return found
    with _lock:
        if path.name in _failed:
            return None
        if path.name in _uncached:
            return _uncached[path.name]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(path.with_suffix(".lock"), "w")
        except OSError:  # a cache folder that cannot be written: probe, and keep the facts in this process
            _uncached[path.name] = _probe(path, keep=False)
            return _uncached[path.name]
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another bbagent process may be probing it now
            found = cached_facts(gpu)
            if found is None:
                found = _probe(path)
    return found


def probe_failure(device: str | None) -> str | None:
    """Why the last probe of this process for ``device``'s GPU failed, or None."""
    gpu = _gpu() if device == "cuda" else None
    return _failed.get(cache_file(gpu).name) if gpu else None


def _probe(path: Path, keep: bool = True) -> DeviceFacts | None:
    try:
        done = subprocess.run([sys.executable, "-m", "bbagent.harness.device_probe", "--device", "cuda"],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError((done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1])
        facts = DeviceFacts.model_validate_json(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, RuntimeError, ValidationError, IndexError) as exc:
        _failed[path.name] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return None
    if facts.gpu is None:
        _failed[path.name] = "the probe found no GPU"
        return None
    if keep:
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            temporary.write_text(facts.model_dump_json(indent=1))
            os.replace(temporary, path)
        except OSError:  # a full or read-only disk: the facts serve this process only
            _uncached[path.name] = facts
    return facts
