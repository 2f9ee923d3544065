"""The temporary working folders bbagent makes (a candidate's, a suite built ahead, a baseline's,
Nsight Compute's, a fork server's), named so that the ones a dead process left behind can be found
and removed: ``bbagent-<kind>-<pid>-<random>`` in the temp directory. A process killed with
``kill -9`` never removes its own; ``orphaned`` finds those whose process is gone (and folders of the
older, pid-less form once they are a day old), ``remove_orphaned`` removes them. A folder whose
process lives is never touched.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

WORKDIR_KINDS = ("cand", "suite", "baseline", "ncu", "ncu-log", "pool", "testable")
_NAMED = re.compile(r"^bbagent-(" + "|".join(sorted(map(re.escape, WORKDIR_KINDS), key=len, reverse=True))
                    + r")-(?:(\d+)-)?[a-z0-9_]+$")
OLD_FORM_AGE_S = 86400.0  # a folder named before pids were in the names: left alone for a day


def make(kind: str) -> Path:
    """A new working folder of ``kind`` (``WORKDIR_KINDS``) for this process."""
    assert kind in WORKDIR_KINDS, kind
    return Path(tempfile.mkdtemp(prefix=f"bbagent-{kind}-{os.getpid()}-")).resolve()


def _process_lives(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def orphaned(where: Path | None = None, now: float | None = None) -> list[Path]:
    """This user's working folders whose process has ended."""
    where = Path(where or tempfile.gettempdir())
    now = now if now is not None else time.time()
    found = []
    try:
        entries = list(where.iterdir())
    except OSError:
        return []
    for path in entries:
        named = _NAMED.match(path.name)
        if not named:
            continue
        try:
            info = path.lstat()
        except OSError:
            continue
        if info.st_uid != os.getuid() or not path.is_dir() or path.is_symlink():
            continue
        pid = named.group(2)
        if pid is not None and int(pid) != os.getpid() and not _process_lives(int(pid)):
            found.append(path)
        elif pid is None and now - info.st_mtime > OLD_FORM_AGE_S:
            found.append(path)
    return sorted(found)


def size_of(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def remove_orphaned(where: Path | None = None, dry_run: bool = False) -> dict:
    """Remove the orphaned working folders; what was (or would be) removed: count and bytes."""
    folders = orphaned(where)
    freed = sum(size_of(path) for path in folders)
    if not dry_run:
        for path in folders:
            shutil.rmtree(path, ignore_errors=True)
    return {"folders": len(folders), "bytes": freed, "paths": [str(p) for p in folders]}
