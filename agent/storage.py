"""Everything a run writes: ``runs/<run_id>/`` and, on success, ``generated_kernels/<op>/``.

Files are written atomically (temp file + rename), so an interrupted run never
leaves a half-written file. Layout of a run directory::

    run.json                 config, versions, status, totals, per-round outcomes (rewritten after each step)
    round-N/prompt.md        the user message sent in round N
    round-N/messages.json    the full conversation sent to the provider in round N
    round-N/response.md      the raw answer
    round-N/usage.json       tokens, latency, attempts
    round-N/kernel.py        the extracted kernel (absent when the answer had no code)
    round-N/verdict.json     the Verdict of that kernel
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from bbagent.agent.errors import UsageError


def resolve_root(root: str | Path | None = None, *, write: bool = False) -> Path:
    """The folder for runs/ and generated_kernels/: ``root``, else $BBAGENT_ROOT, else the current
    directory. With ``write`` it is created (UsageError where it cannot be, or is not writable)."""
    given = root if root is not None else (os.environ.get("BBAGENT_ROOT") or ".")
    where = Path(given).expanduser().resolve()
    source = "--root" if root is not None else ("BBAGENT_ROOT" if os.environ.get("BBAGENT_ROOT") else
                                                "the current directory")
    if where.exists() and not where.is_dir():
        raise UsageError(f"{source} {where} is a file, not a folder: pass --root DIR")
    if not write and not where.exists():  # read from: a typo must not read as "nothing there"
        raise UsageError(f"{source} {where} does not exist: pass --root DIR with the folder that holds runs/ and "
                         "generated_kernels/")
    if write:
        try:
            (where / "runs").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot use {source} {where} to keep runs/ and generated_kernels/ "
                             f"({exc.strerror or exc}): pass --root DIR with a folder you can write") from None
        if not os.access(where / "runs", os.W_OK):
            raise UsageError(f"{source} {where} is not writable: pass --root DIR with a folder you can write")
    return where


@lru_cache(maxsize=1)
def umask() -> int:
    """This process's umask, read once (reading it means setting it and putting it back, which
    must not race with the threads of a batch)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


def follow_umask(path: Path, directory: bool = False) -> None:
    """Give a file or folder made by ``tempfile`` (0600, 0700: private) the permissions the user's
    umask gives anything else they create, so that teammates sharing a checkout can read it."""
    os.chmod(path, (0o777 if directory else 0o666) & ~umask())


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        follow_umask(Path(tmp))
        os.replace(tmp, path)
    except OSError as exc:  # a full disk or a quota: the file it was writing is named
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data) -> None:
    write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def new_run_id(op: str) -> str:
    """``20261127-210501-aten.relu.default-3f2a``; a program's key reads ``kernelbench-level1-19_ReLU``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{op.replace('/', '-')}-{secrets.token_hex(2)}"


class RunDir:
    def __init__(self, root: Path, run_id: str):
        self.path = root / "runs" / run_id
        self.path.mkdir(parents=True, exist_ok=False)

    def round_dir(self, n: int) -> Path:
        return self.path / f"round-{n}"

    def write(self, relative: str, text: str) -> Path:
        target = self.path / relative
        write_atomic(target, text)
        return target

    def write_json(self, relative: str, data) -> Path:
        target = self.path / relative
        write_json(target, data)
        return target


def accept_kernel(root: Path, op: str, kernel_source: str, meta: dict, readme: str,
                  beside: dict[str, str] | None = None) -> Path:
    """Install the accepted kernel as ``generated_kernels/<op>/`` (a program's key is a path:
    ``generated_kernels/kernelbench/level1/19_ReLU/``), replacing the files there whole
    (the caller keeps an earlier version first: ``agent.review.lifecycle.archive_current``); the
    ``versions/`` folder of earlier kernels moves into the new folder. ``beside``: other files of
    the folder by name (a program answer's problem)."""
    final = root / "generated_kernels" / op
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
    follow_umask(staging, directory=True)
    try:
        (staging / "kernel.py").write_text(kernel_source)
        write_json(staging / "meta.json", meta)
        (staging / "README.md").write_text(readme)
        for name, text in (beside or {}).items():
            (staging / name).write_text(text)
        if final.exists():
            if (final / "versions").is_dir():
                os.replace(final / "versions", staging / "versions")
            old = final.with_name(f".{final.name}.old-{secrets.token_hex(2)}")
            os.replace(final, old)
            os.replace(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, final)
    except BaseException:
        if (staging / "versions").is_dir() and final.is_dir() and not (final / "versions").exists():
            os.replace(staging / "versions", final / "versions")
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final
