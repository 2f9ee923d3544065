"""The errors bbagent raises on purpose, in one place; each message says what to change.

``UsageError`` and its kinds are the caller's to fix (exit 2 on the command line); ``ProviderError``
is an LLM provider that cannot answer (exit 3); ``InfrastructureError`` is the machine that runs
evaluations failing, not the kernel (a batch retries the operator later, uncharged). Every other
exception out of bbagent is a bug in it.
"""
from __future__ import annotations

import errno
import os
import sqlite3
import sys
import tempfile
import time
import traceback
from pathlib import Path


class UsageError(ValueError):
    """A usage error: the message says what to change."""


class ReviewError(UsageError):
    """A review command that cannot be done as asked (unknown operator or version, wrong state)."""


class SelectionError(UsageError):
    """A batch's operators cannot be chosen as asked (a bad name, an unreadable dataset)."""


class ReportError(UsageError):
    """What to report cannot be found (the message names what there is)."""


class ModelUnavailable(UsageError):
    """``check-model`` cannot build the model asked for here (a package it needs is missing)."""


class ProviderError(RuntimeError):
    """An LLM call failed for good. The message says what to do about it. ``transient``: the
    provider was unreachable, overloaded or rate limiting (it may answer later), not a call that
    can never succeed (a bad key or model, a replay with no more answers)."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class InfrastructureError(RuntimeError):
    """An evaluation never reached the kernel: the sandbox child died or failed before its tests
    were built (a GPU that fell off the bus, a driver error), or every evaluation slot is out of
    service. Not the kernel's failure."""


class MachineRefused(RuntimeError):
    """The machine refused what a command needs of it: a full disk or quota, a read-only or
    unwritable folder, no file handles or memory left. Not a bug and not the caller's input: the
    message names the path and what to do (exit 74 on the command line)."""


_FIXES = {errno.ENOSPC: "free space on that disk (or pass --root DIR on another one) and run again",
          errno.EDQUOT: "free space within your quota (or pass --root DIR elsewhere) and run again",
          errno.EFBIG: "the file system refuses a file this large; pass --root DIR on another disk",
          errno.EROFS: "that file system is read-only; pass --root DIR with a folder you can write",
          errno.EACCES: "make it writable for you (or pass --root DIR with a folder you can write) and run again",
          errno.EPERM: "make it writable for you (or pass --root DIR with a folder you can write) and run again",
          errno.EIO: "the disk refused the write (an input/output error, or a file-size limit: see ulimit -f and "
                     "dmesg); fix that and run again",
          errno.EMFILE: "raise the open-file limit (ulimit -n) and run again",
          errno.ENFILE: "the system's open-file table is full; close programs or raise fs.file-max and run again",
          errno.ENOMEM: "the machine is out of memory; free some and run again"}


# SQLite's own codes for the same faults (the call log, a batch's ledger, the timing cache)
_SQLITE_ERRNO = {"SQLITE_FULL": errno.ENOSPC, "SQLITE_READONLY": errno.EROFS, "SQLITE_CANTOPEN": errno.EACCES,
                 "SQLITE_IOERR": errno.EIO, "SQLITE_NOMEM": errno.ENOMEM}


def refused_by_machine(exc: BaseException) -> MachineRefused | None:
    """``exc`` as a ``MachineRefused`` when it is an ``OSError`` (or SQLite error) the machine
    caused (``_FIXES``), its message naming the path and the fix; None for anything else (a bug, a
    usage error)."""
    if isinstance(exc, MachineRefused):
        return exc
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", None) or ""  # SQLITE_IOERR_WRITE and its kin: SQLITE_IOERR
        code = _SQLITE_ERRNO.get("SQLITE_IOERR" if name.startswith("SQLITE_IOERR") else name)
        if code is None:
            return None
        exc = OSError(code, f"{os.strerror(code)} ({exc})")
    if not isinstance(exc, OSError) or exc.errno not in _FIXES:
        return None
    what = exc.strerror or os.strerror(exc.errno)
    where = f" at {exc.filename}" if exc.filename else ""
    return MachineRefused(f"the machine refused{where}: {what}. Nothing is wrong with bbagent or its input: "
                          f"{_FIXES[exc.errno]}; what was written before is kept")


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM: a scheduler's stop, a closed session): handled as
    Ctrl-C is, so that a batch ends stopped, with its summary written and resumable."""


def save_traceback(folder: Path | None = None, prefix: str = "bbagent-internal-error-", header: str = "bbagent") -> str:
    """The exception being handled, with its traceback, written to a new file in ``folder`` (made
    where missing; default the temporary folder) under a first line of ``header``, the time and
    the command line: a bug's whole story, for its report. Returns the file's path."""
    if folder is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".txt", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(f"{header}, {time.strftime('%Y-%m-%d %H:%M:%S')}, argv {sys.argv}\n\n")
        f.write(traceback.format_exc())
    return path
