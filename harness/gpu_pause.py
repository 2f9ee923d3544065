"""A sandbox child's GPU work paused while another evaluation holds the GPU alone (the parent's
side is ``harness.sandbox.parent.gpu_share``).

Each child sharing a GPU gets a page of shared memory (a memfd, ``Job.pause_fd``) holding two
numbers. The parent writes a pause request, a generation number (0: none), in the first. At its
next checkpoint (before each test, between the suite's samples, before the GPU is first touched)
the child finishes its GPU work (``torch.cuda.synchronize``), writes the same number in the
second, and then runs nothing on the GPU until the request is withdrawn. The parent takes a child
for quiet only when the second number equals the request standing now, so an acknowledgement left
over from an earlier pause (the child resuming just as a new request comes) is never believed.

The wait for another's timing is then one test long, not the rest of every other evaluation's
tests. A paused child keeps its device memory; the compilations it started ahead keep running on
the host's cores (no GPU work).
"""
from __future__ import annotations

import mmap
import os
import select
import struct
import time

PAGE_BYTES = 8
REQUEST, ACKNOWLEDGED = 0, 4  # byte offsets of the two numbers (little-endian, 32 bits each)
CHILD_POLL_S = 0.002  # how often a paused child looks at the request


def _read(view: mmap.mmap, offset: int) -> int:
    return struct.unpack_from("<I", view, offset)[0]


def _write(view: mmap.mmap, offset: int, value: int) -> None:
    struct.pack_into("<I", view, offset, value)


class PausePage:
    """The parent's side of one child's page."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("bbagent-gpu-pause", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, PAGE_BYTES)
        self.view: mmap.mmap | None = mmap.mmap(self.fd, PAGE_BYTES)
        self.generation = 0  # of the standing request; 0: none
        self.issued = 0  # the last generation issued

    def request(self) -> None:
        """Ask the child to pause at its next checkpoint (no-op while a request stands)."""
        if self.generation == 0 and self.view is not None:
            self.issued = self.issued % 0xFFFFFFFE + 1
            self.generation = self.issued
            _write(self.view, REQUEST, self.generation)

    def withdraw(self) -> None:
        if self.generation and self.view is not None:
            self.generation = 0
            _write(self.view, REQUEST, 0)

    @property
    def requested(self) -> bool:
        return self.generation != 0

    def quiet(self) -> bool:
        """The child has paused for the request standing now."""
        return self.generation != 0 and self.view is not None and _read(self.view, ACKNOWLEDGED) == self.generation

    def close_fd(self) -> None:
        """Once the child has its copy (the mapping stays)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def close(self) -> None:
        self.close_fd()
        if self.view is not None:
            self.view.close()
            self.view = None


class ChildPauses:
    """The child's side: ``checkpoint()`` pauses while the parent asks. ``alive_fd`` is a pipe
    from the parent (the grant pipe) whose end of file says the parent is gone: a paused child
    then stops waiting."""

    def __init__(self, pause_fd: int, alive_fd: int | None, synchronize) -> None:
        self.view = mmap.mmap(pause_fd, PAGE_BYTES)
        os.close(pause_fd)
        self.alive_fd, self.synchronize = alive_fd, synchronize
        self.paused_s, self.pauses = 0.0, 0

    def checkpoint(self) -> None:
        generation = _read(self.view, REQUEST)
        if not generation:
            return
        started = time.perf_counter()
        self.synchronize()  # nothing of this child's still runs on the GPU
        while generation:
            _write(self.view, ACKNOWLEDGED, generation)
            if self._parent_gone():
                break
            generation = _read(self.view, REQUEST)
        _write(self.view, ACKNOWLEDGED, 0)
        self.pauses += 1
        self.paused_s += time.perf_counter() - started

    def _parent_gone(self) -> bool:
        if self.alive_fd is None:
            time.sleep(CHILD_POLL_S)
            return False
        if not select.select([self.alive_fd], [], [], CHILD_POLL_S)[0]:
            return False
        return True  # readable before any request for the GPU alone: only its end of file


_PAUSES: list[ChildPauses] = []


def install_pauses(pause_fd: int | None, alive_fd: int | None, synchronize) -> None:
    """In the child, before anything touches the GPU: checkpoints pause from now on."""
    if pause_fd is not None:
        _PAUSES[:] = [ChildPauses(pause_fd, alive_fd, synchronize)]


def checkpoint() -> None:
    """Where this child may pause its GPU work: between pieces of it, never inside one."""
    if _PAUSES:
        _PAUSES[0].checkpoint()


def paused() -> tuple[int, float]:
    """How often this child paused, and for how long in all."""
    return (_PAUSES[0].pauses, _PAUSES[0].paused_s) if _PAUSES else (0, 0.0)
