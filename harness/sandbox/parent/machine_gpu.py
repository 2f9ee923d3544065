"""One GPU shared by the evaluations of several processes of this user (separate ``bbagent eval``,
``bench`` and ``generate`` processes, a script judging answers eight at a time, a batch beside
them), as a batch shares it among its own (``harness.sandbox.parent.gpu_share``): tests side by
side as device memory allows, timing alone. No server: files under a folder of this user's
(``lock_folder``), one set per GPU (named by its NVML UUID, so that two processes numbering their
GPUs differently still meet), and ``flock``, which the kernel releases when a process dies, however
it dies.

* **Admission by memory**: ``registry.json`` (read and written under ``flock`` on it) lists every
  evaluation admitted in any process, with its process and the device memory it is expected to
  need; one is admitted where its need fits beside the others' live entries (an entry whose process
  is gone is dropped), or where it would be alone.
* **Timing alone**: a readers-writer lock. A process whose evaluations run tests holds ``rw`` shared
  (one lock per process, held while any of its evaluations runs tests); one that wants the GPU
  alone takes ``turnstile`` (so that no process starts new tests meanwhile), then ``rw`` exclusive,
  which it gets once every other process's tests are over; it holds both until its timing ends.
  Its own other evaluations are paused by its own ``GpuShare`` first and hold nothing here then.

Every call is non-blocking: the ``GpuShare`` that owns this asks again from its own wait loops.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
import threading
from pathlib import Path

from bbagent.harness.nvml import NvmlUnavailable, open_gpu
from bbagent.harness.sandbox.parent.environment import physical_gpu
from bbagent.harness.sandbox.parent.gpu_share import GpuShare, USABLE_SHARE


def lock_folder() -> Path:
    """Where the GPUs' lock files live: ``$BBAGENT_GPU_LOCKS``, else a folder of this user's in the
    temporary folder (processes of one user coordinate)."""
    return Path(os.environ.get("BBAGENT_GPU_LOCKS") or Path(tempfile.gettempdir()) / f"bbagent-gpu-{os.getuid()}")


def gpu_identity(visible_entry: str) -> str:
    """The GPU's NVML UUID where NVML can say, else the ``CUDA_VISIBLE_DEVICES`` entry that names it."""
    try:
        return open_gpu(visible_entry).uuid()
    except NvmlUnavailable:
        return f"gpu-{visible_entry.strip()}"


class MachineGpu:
    """This process's side of one GPU's files. ``capacity``: the bytes the evaluations of every
    process may need together (0 where unknown: memory does not limit admission, the GPU alone for
    timing still holds)."""

    def __init__(self, identity: str, capacity: int, folder: Path | None = None):
        self.capacity = capacity
        where = (folder or lock_folder()) / "".join(c if c.isalnum() or c in "-_." else "_" for c in identity)
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.registry = where / "registry.json"
        self._rw = os.open(where / "rw", os.O_RDWR | os.O_CREAT, 0o600)
        self._turnstile = os.open(where / "turnstile", os.O_RDWR | os.O_CREAT, 0o600)
        self._registry_lock = os.open(where / "registry.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self.lock = threading.Lock()
        self.testing = 0  # this process's evaluations admitted here and not left
        self.shared = False  # rw held shared
        self.alone = False  # rw held exclusive (and the turnstile)
        self.turnstile_held = False
        self.entered_here = 0  # this process's admissions so far

    # --- admission by memory ---------------------------------------------------------------------

    def try_enter(self, number: int, need: int) -> bool:
        """Whether this process's evaluation ``number``, needing ``need`` bytes, is admitted (and
        now registered): where it fits beside the other processes' live evaluations (or they are
        none) and no other process holds the GPU alone or waits for it."""
        with self.lock:
            if not (self.alone or self.turnstile_held) and not self._take_shared():
                return False
            with _Flocked(self._registry_lock):
                entries, admitted = self._read()
                others = [e for e in entries if e["pid"] != os.getpid()]
                if others and self.capacity and sum(e["need"] for e in entries) + need > self.capacity:
                    self._drop_shared_if_idle()
                    return False
                entries.append({"pid": os.getpid(), "number": number, "need": int(need)})
                self._write(entries, admitted + 1)
            self.testing += 1
            self.entered_here += 1
            return True

    def mark(self) -> tuple[int, int, bool]:
        """Where admissions stand now: every process's so far, this process's own, and whether
        another process's evaluation is admitted now."""
        with self.lock, _Flocked(self._registry_lock):
            entries, admitted = self._read()
            return admitted, self.entered_here, any(e["pid"] != os.getpid() for e in entries)

    def others_since(self, mark: tuple[int, int, bool]) -> bool:
        """Whether another process's evaluation held the GPU at ``mark`` or was admitted after it."""
        admitted, here, others = mark
        with self.lock, _Flocked(self._registry_lock):
            return others or (self._read()[1] - admitted) - (self.entered_here - here) > 0

    def leave(self, number: int) -> None:
        with self.lock:
            with _Flocked(self._registry_lock):
                entries, admitted = self._read()
                kept = [e for e in entries if not (e["pid"] == os.getpid() and e["number"] == number)]
                if len(kept) != len(entries):
                    self._write(kept, admitted)
                    self.testing -= 1
            self._drop_shared_if_idle()

    def _read(self) -> tuple[list[dict], int]:
        try:
            data = json.loads(self.registry.read_text())
        except (OSError, ValueError):
            return [], 0
        entries = [e for e in data.get("entries", []) if _alive(e.get("pid"))]
        return entries, int(data.get("admitted", 0))

    def _write(self, entries: list[dict], admitted: int) -> None:
        partial = self.registry.with_name(f".registry.{os.getpid()}.{threading.get_ident()}")
        partial.write_text(json.dumps({"entries": entries, "admitted": admitted}))
        os.replace(partial, self.registry)

    # --- the readers-writer lock -------------------------------------------------------------------

    def _take_shared(self) -> bool:
        """rw shared (where it is not held already), through the turnstile: not while another
        process holds that, waiting for the GPU alone or timing, even where this one holds rw
        shared already (else a process starting test after test would keep the other waiting)."""
        if not _try(self._turnstile, fcntl.LOCK_EX):
            return False
        try:
            self.shared = self.shared or _try(self._rw, fcntl.LOCK_SH)
            return self.shared
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def _drop_shared_if_idle(self) -> None:
        if self.shared and not self.testing and not self.alone:
            fcntl.flock(self._rw, fcntl.LOCK_UN)
            self.shared = False

    def try_alone(self) -> bool:
        """The GPU alone across processes: True once every other process's tests are over. Its
        caller's own tests are paused (by its ``GpuShare``) before it asks, so this process's shared
        hold gives way at once (else two processes each waiting for the other's tests to end would
        wait for ever); meanwhile it holds the turnstile, so that no process starts new tests."""
        with self.lock:
            if self.alone:
                return True
            if self.shared:
                fcntl.flock(self._rw, fcntl.LOCK_UN)
                self.shared = False
            if not self.turnstile_held:
                if not _try(self._turnstile, fcntl.LOCK_EX):
                    return False
                self.turnstile_held = True
            self.alone = _try(self._rw, fcntl.LOCK_EX)
            return self.alone

    def end_alone(self) -> None:
        """The GPU alone is over, or no longer wanted: rw given back, held shared again where this
        process's tests go on (at once where the turnstile is this process's; else once another
        process's timing ends), then the turnstile."""
        with self.lock:
            if self.alone:
                fcntl.flock(self._rw, fcntl.LOCK_UN)
                self.alone = False
            if self.testing and not self.shared:
                fcntl.flock(self._rw, fcntl.LOCK_SH)
                self.shared = True
            if self.turnstile_held:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)
                self.turnstile_held = False

    def close(self) -> None:
        for fd in (self._rw, self._turnstile, self._registry_lock):
            try:
                os.close(fd)  # closing releases its locks
            except OSError:
                pass


def _try(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


class _Flocked:
    """``flock`` held exclusively for a short read-modify-write."""

    def __init__(self, fd: int):
        self.fd = fd

    def __enter__(self):
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)


def _alive(pid) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


_MACHINE: dict[str, MachineGpu] = {}
_MACHINE_LOCK = threading.Lock()


def machine_gpu(visible_entry: str, total_memory: int) -> MachineGpu:
    """This process's one ``MachineGpu`` for the GPU that ``visible_entry`` names, of
    ``total_memory`` bytes (0: unknown), its usable share admitted against."""
    identity = gpu_identity(visible_entry)
    with _MACHINE_LOCK:
        if identity not in _MACHINE:
            _MACHINE[identity] = MachineGpu(identity, int(total_memory * USABLE_SHARE))
        return _MACHINE[identity]


PROCESS_AT_ONCE = 8  # evaluations of one process without a batch's own gate (generate's candidates)
_SHARES: dict[str, object] = {}


def process_share(gpu: int | None):
    """The ``GpuShare`` of this process's evaluations on a GPU when no batch gives one (``bbagent
    eval``, ``bench``, ``generate``, ``review``): one per GPU, meeting the other processes on it."""
    entry = physical_gpu(gpu or 0)
    with _MACHINE_LOCK:
        share = _SHARES.get(entry)
    if share is None:
        memory = total_memory(entry)
        share = GpuShare.for_gpu(f"gpu {entry}", memory, PROCESS_AT_ONCE,
                                 across=machine_gpu(entry, memory))
        with _MACHINE_LOCK:
            share = _SHARES.setdefault(entry, share)
    return share


def total_memory(visible_entry: str) -> int:
    """The GPU's memory in bytes, from the driver (NVML); 0 where it cannot say. Never through torch,
    which would hold a CUDA context in this process."""
    try:
        return open_gpu(visible_entry).sample().memory_total
    except NvmlUnavailable:
        return 0
