"""The environment every sandbox child (and its device's fork server) gets, and starting that
fork server early. Imports neither torch nor the Verdict model: ``start_early`` is meant to run
before the caller has imported them, so that the server's start-up overlaps the caller's own."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from bbagent.harness.sandbox import paths
from bbagent.harness.sandbox.parent.pool import pool_for

PROJECT_ROOT = Path(paths.PROJECT_ROOT).resolve()


def _import_root() -> Path | None:
    """The directory on ``sys.path`` that holds the installed ``bbagent`` package, which every child
    imports its code from (``bbagent.harness...``); None in a checkout, whose editable install
    maps the names onto its folders (the install's finder, which every child's interpreter loads)."""
    top = Path(sys.modules[__name__.split(".")[0]].__path__[0]).resolve()
    return top.parent if top.name == __name__.split(".")[0] and (top / "harness").is_dir() else None


IMPORT_ROOT = _import_root()
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH",
                 "TRITON_CACHE_DIR", "TRITON_HOME", "TMPDIR", "NVIDIA_VISIBLE_DEVICES",
                 "PYTHONPYCACHEPREFIX")  # where this Python keeps compiled bytecode, if set: read, never written
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")  # one entry per GPU while NVIDIA's driver is loaded


class SetupError(ValueError):
    """The environment bbagent runs in cannot host the sandbox; the message names the fix."""


def physical_gpu(gpu: int) -> str:
    """The CUDA_VISIBLE_DEVICES entry of the parent's GPU number ``gpu`` (numbered as torch in
    this process numbers them: through this process's own CUDA_VISIBLE_DEVICES, if set)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return str(gpu)
    entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    if not 0 <= gpu < len(entries):
        raise SetupError(f"GPU {gpu} is not visible: CUDA_VISIBLE_DEVICES={visible!r} shows {len(entries)}")
    return entries[gpu]


def triton_cache_dir() -> Path:
    """The Triton cache every child compiles into: ``TRITON_CACHE_DIR`` where set, else bbagent's own."""
    return Path(os.environ.get("TRITON_CACHE_DIR", Path(tempfile.gettempdir()) / "bbagent-triton-cache"))


def base_env(device: str, gpu: int | None = None) -> dict:
    """The allowlisted environment shared by every child of a device (and its fork server);
    pinned to one GPU when ``gpu`` is given (one fork server per GPU)."""
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    if gpu is not None and device != "cpu":
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(gpu)
    # Where bbagent is installed first; then whatever the parent had (e.g. a --target site dir on a GPU box).
    installed = [str(IMPORT_ROOT)] if IMPORT_ROOT is not None else []
    env["PYTHONPATH"] = os.pathsep.join(installed + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["TRITON_CACHE_DIR"] = str(triton_cache_dir())
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:  # torch.cuda.is_available() through NVML, so the fork server never initialises CUDA
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    return env


def likely_device() -> str:
    """The device an evaluation will default to (``harness.evaluate.default_device``), guessed
    without importing torch where it is not imported yet: "cuda" where NVIDIA's driver shows a
    GPU that CUDA_VISIBLE_DEVICES does not hide. A wrong guess only starts a server for nothing."""
    if "torch" in sys.modules:
        return "cuda" if sys.modules["torch"].cuda.is_available() else "cpu"
    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return "cpu"
    try:
        return "cuda" if any(NVIDIA_GPUS.iterdir()) else "cpu"
    except OSError:
        return "cpu"


def start_early(device: str | None = None, gpu: int | None = None) -> None:
    """Start the fork server of ``device`` (default: the likely one) in the background, where none
    runs yet: its interpreter imports torch and Triton (seconds) while the caller does its own
    checks. The first evaluation waits for it; one that cannot start is reported there."""
    try:
        device = device or likely_device()
        pool_for(device, base_env(device, gpu)).start_in_background()
    except (OSError, SetupError):
        pass  # the evaluation starts it, and says what is wrong
