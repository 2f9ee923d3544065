"""What the parent watches while a sandbox child runs: its limits, its output, its processes.

The child leads its own session (``setsid``), so every process it starts is found by
session id in ``/proc``, wherever in the tree it is; their memory is summed (``SessionMemory``).
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
PSS_TIME_SHARE = 0.02  # of the watch's time, at most, reading proportional sizes while under the limit
PSS_TIME_SHARE_OVER_LIMIT = 0.25  # the same while the resident sizes' sum is over it
PSS_MIN_INTERVAL_S = 1.0  # under the limit, between two readings


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
    memory_peak: int = 0  # the most host memory its processes held at one check (SessionMemory)
    stdout: str = ""
    stderr: str = ""


def session_usage(session: int) -> tuple[int, int]:
    """(number of processes, bytes of memory they hold) of the session ``session``: the resident
    size of a lone process; for several, each one's proportional share (``Pss``), since processes
    forked from one another (the child's compile processes) share most of their pages and their
    resident sizes would count those pages once per process. Costly for CUDA processes: the
    watch loop uses ``SessionMemory``."""
    resident = _resident_sizes(session)
    if len(resident) > 1:
        return len(resident), _proportional_total(resident)
    return len(resident), sum(resident.values())


class SessionMemory:
    """The memory a session holds, checked at every poll of the watch loop at little cost. Reading
    a process's proportional size (``smaps_rollup``) walks its page tables holding its memory-map
    lock, 22-34 ms for a process with CUDA's large mappings (H200); doing that for the child and
    its 8 compile processes every 0.1 s kept the parent's watch reading /proc all the time, a
    core per evaluation (the evaluation's own time did not change measurably). So:

    - the resident sizes (``/proc/PID/stat``, cheap) are read at every poll; their sum is never
      below the proportional sum, so under the limit nothing more is needed to decide;
    - the proportional sizes are read again when ``PSS_TIME_SHARE`` of the time (at least
      ``PSS_MIN_INTERVAL_S``) has passed since the last reading, a larger share while the resident
      sum is over the limit, and always before the estimate alone would stop the child;
    - between readings, the estimate is the last proportional sum plus the resident growth since.
    """

    def __init__(self):
        self._pss: int | None = None
        self._resident_at_pss = 0
        self._next_pss_at = 0.0

    def usage(self, session: int, limit: int) -> tuple[int, int]:
        """(number of processes, bytes held, read or estimated) for ``session``."""
        resident = _resident_sizes(session)
        total = sum(resident.values())
        if len(resident) <= 1:
            return len(resident), total
        estimate = total if self._pss is None else min(total, self._pss + max(0, total - self._resident_at_pss))
        now = time.monotonic()
        if now >= self._next_pss_at or estimate > limit:
            started = time.perf_counter()
            self._pss = _proportional_total(resident)
            cost = time.perf_counter() - started
            if total <= limit:
                wait = max(PSS_MIN_INTERVAL_S, cost / PSS_TIME_SHARE)
            else:
                wait = cost / PSS_TIME_SHARE_OVER_LIMIT
            self._resident_at_pss, self._next_pss_at = total, now + wait
            estimate = self._pss
        return len(resident), estimate


def _resident_sizes(session: int) -> dict[str, int]:
    """Resident bytes of each process of the session, by pid."""
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
    return resident


def _proportional_total(resident: dict[str, int]) -> int:
    """The proportional sizes of these processes (``_resident_sizes``), summed."""
    return sum(_proportional(pid, rss) for pid, rss in resident.items())


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
