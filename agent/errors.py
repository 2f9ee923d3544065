"""The errors bbagent raises on purpose, in one place; each message says what to change.

``UsageError`` and its kinds are the caller's to fix (exit 2 on the command line); ``ProviderError``
is an LLM provider that cannot answer (exit 3); ``InfrastructureError`` is the machine that runs
evaluations failing, not the kernel (a batch retries the operator later, uncharged). Every other
exception out of bbagent is a bug in it.
"""
from __future__ import annotations

import os
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
