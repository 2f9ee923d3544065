"""What the parent watches while a sandbox child runs: its limits, its output, its processes.

The child leads its own session (``setsid``), so every process it starts is found by
session id in ``/proc``, wherever in the tree it is; their memory is summed (``session_usage``).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def _default_memory_limit() -> int:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(16 << 30, int(total * 0.4))


@dataclass
class Limits:
    """Per-candidate limits the parent enforces (the child also gets rlimits, see containment)."""
    test_seconds: float = 60.0  # one test's candidate call and checks, compilation and autotuning excluded
    compile_seconds: float = 240.0  # compilation and autotuning, all tests together (the wall limit still applies)
    memory_bytes: int = field(default_factory=_default_memory_limit)
    processes: int = 64
    output_bytes: int = 16 << 20


@dataclass
class ChildOutcome:
    """How the child ended, as the parent saw it."""
    returncode: int | None = None
    limit: str = ""  # "timeout", "compile_budget", "host_oom", "process_spawn", "output_flood": the parent stopped it
    detail: str = ""
    hang_site: str = ""
    wall_s: float = 0.0
    launched_at: float = 0.0
    memory_peak: int = 0  # the most host memory its processes held at one check (session_usage)
    stdout: str = ""
    stderr: str = ""


def session_usage(session: int) -> tuple[int, int]:
    """(number of processes, bytes of memory they hold) of the session ``session``: the resident
    size of a lone process; for several, each one's proportional share (``Pss``), since processes
    forked from one another (the child's compile processes) share most of their pages and their
    resident sizes would count those pages once per process."""
    resident = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        # after "pid (comm) ": state ppid pgrp session ... rss is the 22nd
        if len(fields) > 21 and int(fields[3]) == session:
            resident[entry] = int(fields[21]) * PAGE_SIZE
    if len(resident) > 1:
        return len(resident), sum(_proportional(pid, rss) for pid, rss in resident.items())
    return len(resident), sum(resident.values())


def _proportional(pid: str, resident: int) -> int:
    """The process's proportional set size in bytes (its resident size where the kernel gives none)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resident


class BoundedCapture(threading.Thread):
    """Reads a pipe to its end, keeping the first and last ``keep`` bytes and counting all."""

    def __init__(self, fd: int, limit: int, keep: int = 8192):
        super().__init__(daemon=True)
        self.fd, self.limit, self.keep = fd, limit, keep
        self.head = b""
        self.tail = b""
        self.total = 0

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as stream:
            while True:
                chunk = stream.read(65536)
                if not chunk:
                    return
                self.total += len(chunk)
                if len(self.head) < self.keep:
                    room = self.keep - len(self.head)
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail = (self.tail + chunk)[-self.keep:]

    def text(self, limit: int) -> str:
        """The output, cut in the middle with a note when longer than ``limit`` bytes."""
        head, tail = self.head, self.tail
        if self.total == len(head) + len(tail) and self.total <= limit:
            return (head + tail).decode("utf-8", "replace")
        half = limit // 2
        head, tail = head[:half], (head + tail)[-half:] if self.total == len(head) + len(tail) else tail[-half:]
        dropped = self.total - len(head) - len(tail)
        return (head.decode("utf-8", "replace") + f"\n[... {dropped} bytes left out ...]\n"
                + tail.decode("utf-8", "replace"))
