"""A hash of bbagent's test harness: its code and data (trace shapes, tolerances)."""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def harness_fingerprint() -> str:
    """Any change to what a kernel is tested with changes it (an approved kernel goes stale, a
    cached suite is built again)."""
    harness = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in harness.rglob("*") if p.is_file() and p.suffix in (".py", ".json", ".txt")):
        digest.update(path.relative_to(harness).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
