"""Sharing one GPU among evaluations, by phase (parent side).

Correctness tests are milliseconds of GPU work between host-side checks and compiles, so several
evaluations run their tests on one GPU at once. Timing, compiled baselines and profiling measure
the GPU, so each holds it alone: nothing else runs kernels on it meanwhile.

``GpuShare`` is a readers-writer gate with admission by memory:

* an evaluation ``enter``s shared before its child starts, once the memory it is expected to need
  (``need_for``) fits beside the others' (and fewer than ``max_shared`` run); it waits otherwise.
  An evaluation alone on the GPU is always admitted, whatever it needs;
* before timing, the child asks for the GPU alone (``harness.events.ExclusiveWanted``); its
  evaluation leaves the shared side and waits until no other evaluation holds the GPU
  (``go_exclusive``). While one waits for it, no new evaluation is admitted, so it never starves;
* ``leave`` when the evaluation (its baselines and profiles included) is over.

What an evaluation needs is learned: each child reports the most device memory its allocator held
(``Done.device_memory_peak``), kept per suite; an operator not seen yet is expected to need what its
largest trace input suggests (``harness.suite.memory_need``), or ``FIRST_GUESS_SHARE`` of the GPU
where no trace says. A guess too small costs a wait, not a verdict: the child retries
its own work after an out-of-memory (``harness.sandbox.device_memory``) and an evaluation that
failed for memory while sharing is run again alone (``harness.evaluate``).

Every hold is logged (``intervals``) so that tests can check that no exclusive phase ever
overlapped another evaluation's hold, and batches can say how long candidates waited.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass, field

FIRST_GUESS_SHARE = 4  # an operator never measured is expected to need a quarter of the GPU
NEED_MARGIN = 1.25  # over the largest peak measured for the suite
CONTEXT_BYTES = 1 << 30  # a CUDA context, Triton's and torch's own, beside the allocator's memory
USABLE_SHARE = 0.9  # of the GPU's memory, for all the evaluations' needs together
INTERVALS_KEPT = 100_000


@dataclass
class Hold:
    """One evaluation's hold on the GPU."""
    number: int
    need: int
    label: str = ""
    phase: str = "waiting"  # waiting, shared, exclusive, left
    since: float = 0.0
    waited_s: float = 0.0  # for admission and for the GPU alone, together
    shared_with_others: bool = False  # another evaluation held the GPU during this one's shared phase


@dataclass
class Interval:
    hold: int
    phase: str
    start: float
    end: float


@dataclass
class GpuShare:
    """One GPU's gate. ``capacity`` is the bytes of device memory the evaluations may need
    together (0 where unknown: admitted by count alone); ``max_shared`` the evaluations at once
    (the host's cores and memory bound it)."""
    name: str
    capacity: int
    max_shared: int
    clock: object = time.monotonic
    condition: threading.Condition = field(default_factory=threading.Condition)
    shared: dict = field(default_factory=dict)  # hold number -> Hold
    exclusive: Hold | None = None
    exclusive_waiting: int = 0
    learned: dict = field(default_factory=dict)  # suite key -> largest device memory a child held
    intervals: list = field(default_factory=list)
    _numbers: object = field(default_factory=itertools.count)

    @classmethod
    def for_gpu(cls, name: str, total_memory: int, max_shared: int) -> "GpuShare":
        return cls(name=name, capacity=int(total_memory * USABLE_SHARE), max_shared=max(1, max_shared))

    # --- what an evaluation needs --------------------------------------------------------------

    def need_for(self, suite_key: str | None, first_guess: int | None = None) -> int:
        """The device memory an evaluation of this suite is expected to need: its children's
        largest peak so far, with a margin; else ``first_guess`` (``harness.suite.memory_need``
        from the traces), else a quarter of the GPU."""
        peak = self.learned.get(suite_key)
        if peak is not None:
            return int(peak * NEED_MARGIN) + CONTEXT_BYTES
        return first_guess if first_guess else self.capacity // FIRST_GUESS_SHARE

    def learn(self, suite_key: str | None, peak_bytes: int | None) -> None:
        if suite_key is not None and peak_bytes:
            with self.condition:
                self.learned[suite_key] = max(self.learned.get(suite_key, 0), int(peak_bytes))

    # --- the phases ----------------------------------------------------------------------------

    def enter(self, need: int, label: str = "") -> Hold:
        """Wait until the evaluation may start its tests beside the others; its hold."""
        hold = Hold(number=next(self._numbers), need=need, label=label)
        started = self.clock()
        with self.condition:
            while not self._admits(hold):
                self.condition.wait()
            hold.waited_s += self.clock() - started
            hold.phase, hold.since = "shared", self.clock()
            self.shared[hold.number] = hold
            if len(self.shared) > 1:
                for other in self.shared.values():
                    other.shared_with_others = True
        return hold

    def _admits(self, hold: Hold) -> bool:
        if self.exclusive is not None or self.exclusive_waiting:
            return False
        if not self.shared:
            return True
        reserved = sum(h.need for h in self.shared.values())
        fits = not self.capacity or reserved + hold.need <= self.capacity  # 0: the memory is unknown
        return len(self.shared) < self.max_shared and fits

    def go_exclusive(self, hold: Hold) -> bool:
        """Leave the shared side and wait until this evaluation holds the GPU alone (at once where
        it does already). False where the evaluation ``leave``s first (its child ended)."""
        started = self.clock()
        with self.condition:
            if hold.phase == "exclusive":
                return True
            self._end_phase(hold)
            self.exclusive_waiting += 1
            try:
                while (self.exclusive is not None or self.shared) and hold.phase != "left":
                    self.condition.wait()
            finally:
                self.exclusive_waiting -= 1
                self.condition.notify_all()
            hold.waited_s += self.clock() - started
            if hold.phase == "left":
                return False
            hold.phase, hold.since = "exclusive", self.clock()
            self.exclusive = hold
            return True

    def alone(self, need: int, label: str = "") -> Hold:
        """A hold that has the GPU alone from the start (an evaluation run again alone)."""
        hold = Hold(number=next(self._numbers), need=need, label=label, phase="between")
        self.go_exclusive(hold)
        return hold

    def leave(self, hold: Hold) -> None:
        with self.condition:
            self._end_phase(hold)
            hold.phase = "left"
            self.condition.notify_all()

    def _end_phase(self, hold: Hold) -> None:
        if hold.phase == "shared":
            self.shared.pop(hold.number, None)
        elif hold.phase == "exclusive" and self.exclusive is hold:
            self.exclusive = None
        else:
            return
        self.intervals.append(Interval(hold.number, hold.phase, hold.since, self.clock()))
        del self.intervals[:-INTERVALS_KEPT]
        hold.phase = "between"
        self.condition.notify_all()

    def holding(self) -> dict:
        """Now: the evaluations running tests, whether one holds the GPU alone, how many wait for it."""
        with self.condition:
            return {"shared": len(self.shared), "exclusive": self.exclusive is not None,
                    "exclusive_waiting": self.exclusive_waiting,
                    "reserved_bytes": sum(h.need for h in self.shared.values())}


def overlaps(intervals: list[Interval]) -> list[tuple[Interval, Interval]]:
    """Pairs of holds of different evaluations that overlapped in time where one of them was
    exclusive: none, if the gate works."""
    exclusive = [i for i in intervals if i.phase == "exclusive"]
    return [(x, other) for x in exclusive for other in intervals
            if other.hold != x.hold and other.start < x.end and x.start < other.end]


class ChildGate:
    """The parent's side of one child's phases under a ``GpuShare``: the grant pipe (the child
    reads its end, ``Job.grant_fd``), and the seconds the child spent waiting for the GPU alone,
    which its time limit does not count."""

    def __init__(self, share: GpuShare, hold: Hold):
        self.share, self.hold = share, hold
        self.read_fd, self.write_fd = os.pipe()
        self.lock = threading.Lock()
        self.waiting_since: float | None = None
        self.waited_s = 0.0

    def wanted(self) -> None:
        """The child asked for the GPU alone (``ExclusiveWanted``): granted from a thread of its own."""
        with self.lock:
            self.waiting_since = time.perf_counter()
        threading.Thread(target=self._grant, name="bbagent-gpu-grant", daemon=True).start()

    def _grant(self) -> None:
        granted = self.share.go_exclusive(self.hold)
        with self.lock:  # closed under the same lock: a closed fd's number may be another file's by now
            self.waited_s += time.perf_counter() - (self.waiting_since or time.perf_counter())
            self.waiting_since = None
            if granted and self.write_fd >= 0:
                try:
                    os.write(self.write_fd, b"g")
                except OSError:
                    pass  # the child is gone

    def paused_s(self) -> float:
        """Seconds the child has waited for the GPU alone so far."""
        with self.lock:
            return self.waited_s + (time.perf_counter() - self.waiting_since if self.waiting_since else 0.0)

    def close_child_end(self) -> None:
        """Once the child has its copy of the read end."""
        with self.lock:
            if self.read_fd >= 0:
                os.close(self.read_fd)
                self.read_fd = -1

    def close(self) -> None:
        self.close_child_end()
        with self.lock:
            if self.write_fd >= 0:
                os.close(self.write_fd)
                self.write_fd = -1
