"""A hash of bbagent's test harness: its code and data (trace shapes, tolerances); and Triton's
version, read without importing Triton."""
from __future__ import annotations

import hashlib
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "triton-xpu")


@lru_cache(maxsize=1)
def triton_version() -> str:
    """Triton's version, from its installed metadata: importing Triton in the caller's process
    would fix the interpreter's setting there (``TRITON_INTERPRET`` is read at Triton's import),
    and a later ``bbagent.enable(device="cpu")`` or ``load`` could no longer run the kernels
    under it. Where Triton is imported already, or no distribution says, its own ``__version__``."""
    if "triton" not in sys.modules:
        for name in TRITON_DISTRIBUTIONS:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
    import triton
    return triton.__version__


@lru_cache(maxsize=1)
def harness_fingerprint() -> str:
    """Any change to what a kernel is tested with changes it (an approved kernel goes stale, a
    cached suite is built again)."""
    harness = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in harness.rglob("*") if p.is_file() and p.suffix in (".py", ".json", ".txt")):
        digest.update(path.relative_to(harness).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
