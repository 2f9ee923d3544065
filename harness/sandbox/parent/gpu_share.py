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
its own work after an out-of-memory (``harness.sandbox.child.device_memory``) and an evaluation that
failed for memory while sharing is run again alone (``harness.evaluate``).

Every hold is logged (``intervals``) so that tests can check that no exclusive phase ever
overlapped another evaluation's hold, and batches can say how long candidates waited.

Other processes on the same GPU (separate ``bbagent eval`` processes, a batch beside them) are met
through ``across`` (``harness.sandbox.parent.machine_gpu.MachineGpu``): an evaluation is admitted
only where it fits beside theirs too, and holds the GPU alone only once their tests are over; the
wait loops ask it again every ``ACROSS_POLL_S``. An evaluation that met another process's is
``crowded`` as one that met this process's others.
"""
from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from bbagent.harness.gpu_pause import PausePage

FIRST_GUESS_SHARE = 4  # an operator never measured is expected to need a quarter of the GPU
NEED_MARGIN = 1.25  # over the largest peak measured for the suite
CONTEXT_BYTES = 1 << 30  # a CUDA context, Triton's and torch's own, beside the allocator's memory
USABLE_SHARE = 0.9  # of the GPU's memory, for all the evaluations' needs together
INTERVALS_KEPT = 100_000
PARENT_POLL_S = 0.005  # how often one waiting for the GPU alone looks whether the others have paused
ACROSS_POLL_S = 0.1  # how often one waiting for admission asks the other processes again


@dataclass
class Hold:
    """One evaluation's hold on the GPU."""
    number: int
    need: int
    label: str = ""
    phase: str = "waiting"  # waiting (to be admitted), shared, wants_alone, exclusive, between, left
    since: float = 0.0
    waited_s: float = 0.0  # for admission and for the GPU alone, together
    shared_with_others: bool = False  # another evaluation held the GPU during this one's shared phase
    page: PausePage | None = None  # where its child is asked to pause (None: a child that cannot pause)
    empty_device: bool = False  # it wants the GPU with no other evaluation on it at all (a run again alone)
    active_since: float | None = None  # running its tests, not known to be paused, since
    ever_active: bool = False  # its child has been let run its GPU work at some time
    paused_since: float | None = None  # a pause request has stood since
    paused_s: float = 0.0  # pause requests that stood, before that
    process_group: int | None = None  # its child's, while the child runs
    stopped_since: float | None = None  # its child's processes stopped (SIGSTOP) while another is timed, since
    stopped_s: float = 0.0  # stops before that
    across: bool = False  # admitted among the other processes' evaluations too (GpuShare.across)
    across_mark: tuple | None = None  # where their admissions stood when it was (MachineGpu.mark)


@dataclass
class Interval:
    hold: int
    phase: str
    start: float
    end: float


class Across(Protocol):
    """The GPU's admissions across processes (``harness.sandbox.parent.machine_gpu.MachineGpu``)."""

    def try_enter(self, number: int, need: int) -> bool: ...

    def mark(self) -> tuple[int, int, bool]: ...

    def others_since(self, mark: tuple[int, int, bool]) -> bool: ...

    def leave(self, number: int) -> None: ...

    def try_alone(self) -> bool: ...

    def end_alone(self) -> None: ...


@dataclass
class GpuShare:
    """One GPU's gate. ``capacity`` is the bytes of device memory the evaluations may need
    together (0 where unknown: admitted by count alone); ``max_shared`` the evaluations at once
    (the host's cores and memory bound it)."""
    name: str
    capacity: int
    max_shared: int
    clock: Callable[[], float] = time.monotonic
    condition: threading.Condition = field(default_factory=threading.Condition)
    holds: dict = field(default_factory=dict)  # hold number -> Hold, every one admitted and not left
    exclusive: Hold | None = None
    exclusive_waiting: int = 0
    learned: dict = field(default_factory=dict)  # suite key -> largest device memory a child held
    intervals: list = field(default_factory=list)
    most_held: int = 0  # the most evaluations admitted at once so far
    across: Across | None = None  # the other processes on this GPU (harness.sandbox.parent.machine_gpu.MachineGpu)
    _numbers: Iterator[int] = field(default_factory=itertools.count)

    @classmethod
    def for_gpu(cls, name: str, total_memory: int, max_shared: int, across=None) -> "GpuShare":
        return cls(name=name, capacity=int(total_memory * USABLE_SHARE), max_shared=max(1, max_shared),
                   across=across)

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

    def enter(self, need: int, label: str = "", pausable: bool = True) -> Hold:
        """Wait until the evaluation may start its tests beside the others; its hold. A
        ``pausable`` one's child pauses at its checkpoints when asked (``Hold.page``)."""
        hold = Hold(number=next(self._numbers), need=need, label=label, page=PausePage() if pausable else None)
        started = self.clock()
        with self.condition:
            while not self._admits(hold):
                self.condition.wait(ACROSS_POLL_S if self.across is not None else None)
            hold.waited_s += self.clock() - started
            hold.phase, hold.since = "shared", self.clock()
            self.holds[hold.number] = hold
            self.most_held = max(self.most_held, len(self.holds))
            if self._pausing():  # its child starts paused: it touches the GPU only once let
                self._ask_to_pause(hold)
            else:
                self._let_run(hold)
            if len(self.holds) > 1:
                for other in self.holds.values():
                    other.shared_with_others = True
        return hold

    def _admits(self, hold: Hold) -> bool:
        if any(h.empty_device for h in self.holds.values()):
            return False
        if (self.exclusive is not None or self.exclusive_waiting) and hold.page is None:
            return False  # it could not be paused for the one alone
        if self.holds:
            reserved = sum(h.need for h in self.holds.values())
            fits = not self.capacity or reserved + hold.need <= self.capacity  # 0: the memory is unknown
            if len(self.holds) >= self.max_shared or not fits:
                return False
        return self._admitted_across(hold)

    def _admitted_across(self, hold: Hold) -> bool:
        """Admitted among the other processes' evaluations (or there is no ``across``); asked last,
        since a yes there registers the hold."""
        if self.across is None:
            return True
        hold.across_mark = self.across.mark()
        hold.across = self.across.try_enter(hold.number, hold.need)
        return hold.across

    def crowded(self, hold: Hold) -> bool:
        """Whether another evaluation held the GPU while ``hold`` did, of this process or another."""
        if hold.shared_with_others:
            return True
        return self.across is not None and hold.across_mark is not None and self.across.others_since(hold.across_mark)

    def _pausing(self) -> bool:
        return self.exclusive is not None or self.exclusive_waiting > 0

    def go_exclusive(self, hold: Hold) -> bool:
        """Wait until this evaluation holds the GPU alone: every other evaluation's child paused
        at a checkpoint (or, for ``Hold.empty_device``, gone). At once where it holds it already.
        False where the evaluation ``leave``s first (its child ended)."""
        started = self.clock()
        with self.condition:
            if hold.phase == "exclusive":
                return True
            self._end_phase(hold)
            hold.phase = "wants_alone"
            self.holds[hold.number] = hold
            self.exclusive_waiting += 1
            try:
                while hold.phase != "left" and not self._alone_possible(hold):
                    self.condition.wait(PARENT_POLL_S)
            finally:
                self.exclusive_waiting -= 1
            hold.waited_s += self.clock() - started
            if hold.phase == "left":
                if self.across is not None:
                    self.across.end_alone()  # given up: the other processes' turn, this one's tests go on
                self._resume_all()
                return False
            hold.phase, hold.since = "exclusive", self.clock()
            self.exclusive = hold
            for other in self.holds.values():
                self._stop(other)
            return True

    def _alone_possible(self, hold: Hold) -> bool:
        if self.exclusive is not None:
            return False
        others = [h for h in self.holds.values() if h is not hold]
        if hold.empty_device:
            here = not others
        else:
            for other in others:
                if other.phase == "shared":
                    self._ask_to_pause(other)
            here = all(self._quiet(other) for other in others)
        return here and (self.across is None or self.across.try_alone())  # then the other processes

    def _quiet(self, hold: Hold) -> bool:
        """The hold's child runs nothing on the GPU now, nor will until let run again."""
        if hold.phase != "shared":
            return True  # it waits for the GPU alone, or is between phases: no child of its runs
        if hold.page is None or not hold.page.requested:
            return False
        if hold.ever_active and not hold.page.quiet():
            return False
        if hold.active_since is not None:  # its running ended by now, at the latest
            self._log(hold, "shared", hold.active_since)
            hold.active_since = None
        return True

    def _stop(self, hold: Hold) -> None:
        """A paused child's processes stopped while another evaluation is timed: the compilations
        it started ahead no longer take the host's cores from the timed one's launches."""
        if hold is self.exclusive or hold.phase != "shared" or hold.process_group is None:
            return
        if hold.stopped_since is not None or not self._quiet(hold):
            return
        try:
            os.killpg(hold.process_group, signal.SIGSTOP)
            hold.stopped_since = self.clock()
        except OSError:
            pass  # it has ended

    def _go_on(self, hold: Hold) -> None:
        if hold.stopped_since is not None:
            hold.stopped_s += self.clock() - hold.stopped_since
            hold.stopped_since = None
            try:
                if hold.process_group is not None:
                    os.killpg(hold.process_group, signal.SIGCONT)
            except OSError:
                pass

    def child_started(self, hold: Hold, process_group: int | None) -> None:
        """The hold's child runs in this process group (None: it has ended); one that starts while
        another evaluation is timed is stopped at once."""
        with self.condition:
            if process_group is None:
                self._go_on(hold)
            hold.process_group = process_group
            if process_group is not None and self.exclusive is not None:
                self._stop(hold)

    def _ask_to_pause(self, hold: Hold) -> None:
        if hold.page is not None and not hold.page.requested:
            hold.page.request()
            hold.paused_since = self.clock()

    def _end_pause(self, hold: Hold) -> None:
        """The pause request's standing time added to the hold's paused seconds."""
        if hold.paused_since is not None:
            hold.paused_s += self.clock() - hold.paused_since
            hold.paused_since = None

    def _let_run(self, hold: Hold) -> None:
        self._go_on(hold)
        if hold.page is not None and hold.page.requested:
            hold.page.withdraw()
            self._end_pause(hold)
        if hold.active_since is None:
            hold.active_since, hold.ever_active = self.clock(), True

    def _resume_all(self) -> None:
        if not self._pausing():
            for hold in self.holds.values():
                if hold.phase == "shared":
                    self._let_run(hold)
        self.condition.notify_all()

    def alone(self, need: int, label: str = "") -> Hold:
        """A hold that has the GPU to itself from the start, no other evaluation on it at all (an
        evaluation run again alone, after a failure for want of memory while sharing)."""
        hold = Hold(number=next(self._numbers), need=need, label=label, phase="between", empty_device=True)
        self.go_exclusive(hold)
        return hold

    def leave(self, hold: Hold) -> None:
        with self.condition:
            self._go_on(hold)
            self._end_phase(hold)
            self.holds.pop(hold.number, None)
            if hold.across and self.across is not None:
                self.across.leave(hold.number)
                hold.across = False
            hold.phase = "left"
            if hold.page is not None:
                hold.page.close()
            self.condition.notify_all()

    def _end_phase(self, hold: Hold) -> None:
        if hold.phase == "shared":
            if hold.active_since is not None:
                self._log(hold, "shared", hold.active_since)
            hold.active_since = None
            self._end_pause(hold)
        elif hold.phase == "exclusive" and self.exclusive is hold:
            self._log(hold, "exclusive", hold.since)
            self.exclusive = None
            if self.across is not None:
                self.across.end_alone()
            self._resume_all()
        hold.phase = "between" if hold.phase in ("shared", "exclusive") else hold.phase
        self.condition.notify_all()

    def _log(self, hold: Hold, phase: str, start: float) -> None:
        self.intervals.append(Interval(hold.number, phase, start, self.clock()))
        del self.intervals[:-INTERVALS_KEPT]

    def paused_s(self, hold: Hold) -> float:
        """Seconds a pause request has stood for this hold's child in all."""
        return self._so_far(hold.paused_s, hold.paused_since)

    def stopped_s(self, hold: Hold) -> float:
        """Seconds this hold's child has been stopped in all (its compilations made no progress)."""
        return self._so_far(hold.stopped_s, hold.stopped_since)

    def _so_far(self, before: float, since: float | None) -> float:
        """Seconds counted ``before``, plus those of the stretch running ``since`` (None: none runs)."""
        with self.condition:
            return before + (self.clock() - since if since is not None else 0.0)

    def holding(self) -> dict:
        """Now: the evaluations running tests, whether one holds the GPU alone, how many wait for it."""
        with self.condition:
            return {"shared": sum(h.phase == "shared" for h in self.holds.values()),
                    "exclusive": self.exclusive is not None, "exclusive_waiting": self.exclusive_waiting,
                    "reserved_bytes": sum(h.need for h in self.holds.values())}


def overlaps(intervals: list[Interval]) -> list[tuple[Interval, Interval]]:
    """Pairs of holds of different evaluations that overlapped in time where one of them was
    exclusive: none, if the gate works (a shared hold's interval is a stretch its child was let run)."""
    exclusive = [i for i in intervals if i.phase == "exclusive"]
    return [(x, other) for x in exclusive for other in intervals
            if other.hold != x.hold and other.start < x.end and x.start < other.end]


class ChildGate:
    """The parent's side of one child's phases under a ``GpuShare``: the grant pipe (the child
    reads its end, ``Job.grant_fd``), the hold's pause page (``Job.pause_fd``,
    ``harness.gpu_pause``), and the seconds the child spent waiting for the GPU alone or paused
    for another's, which its time limit does not count."""

    def __init__(self, share: GpuShare, hold: Hold):
        self.share, self.hold = share, hold
        self.read_fd, self.write_fd = os.pipe()
        self.lock = threading.Lock()
        self.waiting_since: float | None = None
        self.waited_s = 0.0

    def child_fds(self) -> list[int]:
        """What the child gets: the grant pipe's read end, then its pause page where it has one."""
        page = self.hold.page
        return [self.read_fd] + ([page.fd] if page is not None and page.fd >= 0 else [])

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
        """Seconds the child has waited for the GPU alone, or been asked to pause, so far."""
        with self.lock:
            waiting = self.waited_s + (time.perf_counter() - self.waiting_since if self.waiting_since else 0.0)
        return waiting + self.share.paused_s(self.hold)

    def stopped_s(self) -> float:
        return self.share.stopped_s(self.hold)

    def started(self, process_group: int | None) -> None:
        """The child runs in this process group (None: it has ended)."""
        self.share.child_started(self.hold, process_group)

    def close_child_end(self) -> None:
        """Once the child has its copies of the read end and the page."""
        with self.lock:
            if self.read_fd >= 0:
                os.close(self.read_fd)
                self.read_fd = -1
            if self.hold.page is not None:
                self.hold.page.close_fd()

    def close(self) -> None:
        self.close_child_end()
        with self.lock:
            if self.write_fd >= 0:
                os.close(self.write_fd)
                self.write_fd = -1
