"""Where a batch's evaluations run. The agent loop asks an executor to evaluate a kernel file and
waits for the Verdict; it never knows where the evaluation ran. ``LocalExecutor`` runs them on this
machine, one at a time per GPU (so a timing never shares its GPU), each GPU with its own pinned
sandbox pool; ``agent.batch.ray_executor.RayExecutor`` runs them on the GPUs of a Ray cluster. Both
hand out their slots as ``SlotPool`` does: a free slot takes the next waiting candidate, first come
first served, among the slots that candidate accepts.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Protocol

from agent.errors import InfrastructureError


class Executor(Protocol):
    def evaluate(self, op: str, kernel_path: Path, **options):
        """The Verdict of ``harness.evaluate.evaluate(op, kernel_path, **options)``."""

    def activity(self) -> list[dict]:
        """Per slot (a GPU, or a CPU worker): name, busy (the op it evaluates, or None),
        evaluations, busy_s (seconds spent evaluating since ``since``, the executor's start)."""

    def gpu_label(self) -> str:
        """The GPU model(s) evaluations run on ("cpu" for the interpreter): part of the resume key."""

    def close(self) -> None:
        """Let go of what the executor holds."""


RETIRE_AFTER = 3  # sandbox failures in a row on one slot before it is taken out (a lost GPU)


class SlotLost(RuntimeError):
    """The evaluation was lost with its slot's process (``retire``: with its node, for good); it
    runs again, on another slot where one is free first."""

    def __init__(self, message: str, retire: bool = False):
        super().__init__(message)
        self.retire = retire


class Slot:
    def __init__(self, name: str, gpu: int | None, model: str | None = None):
        self.name, self.gpu, self.model = name, gpu, model
        self.busy: str | None = None
        self.busy_since = 0.0
        self.busy_s = 0.0
        self.evaluations = 0
        self.failures_in_a_row = 0
        self.retired: str | None = None  # why it takes no more work
        self.lost = 0  # evaluations it lost in flight (they ran again elsewhere)


class SlotPool:
    """Slots and the evaluations waiting for one, in arrival order. A waiting evaluation takes the
    first free slot it accepts that no evaluation ahead of it accepts; ``evaluate`` runs it there
    (``_run_on``, each executor's own), takes a slot out after RETIRE_AFTER sandbox failures in a
    row, and runs an evaluation whose slot was lost (``SlotLost``) again on another."""

    def __init__(self, slots: list[Slot]):
        self.slots = slots
        self.free = list(slots)
        self.waiting: list[tuple[object, Callable[[Slot], bool]]] = []  # (ticket, accepts), in arrival order
        self.condition = threading.Condition()
        self.started = time.time()

    def _run_on(self, slot: Slot, op: str, kernel_path: Path, options: dict):
        raise NotImplementedError

    def _accepts(self, op: str) -> Callable[[Slot], bool]:
        return lambda slot: True

    def _no_slot_left(self) -> None:
        """Called when every slot is out of service, before giving up (a cluster may find new ones)."""

    def _granted(self) -> dict[object, Slot]:
        free, granted = list(self.free), {}
        for ticket, accepts in self.waiting:
            slot = next((s for s in free if accepts(s)), None)
            if slot is not None:
                free.remove(slot)
                granted[ticket] = slot
        return granted

    def _take(self, accepts: Callable[[Slot], bool]) -> Slot:
        ticket = object()
        with self.condition:
            if all(slot.retired for slot in self.slots):
                self._no_slot_left()
            if all(slot.retired for slot in self.slots):
                raise InfrastructureError("every evaluation slot is out of service: "
                                     + "; ".join(f"{s.name}: {s.retired}" for s in self.slots))
            self.waiting.append((ticket, accepts))
            while (slot := self._granted().get(ticket)) is None:
                self.condition.wait()
            self.waiting = [entry for entry in self.waiting if entry[0] is not ticket]
            self.free.remove(slot)
            self.condition.notify_all()  # the next in line may find a slot too
            return slot

    def _give(self, slot: Slot) -> None:
        with self.condition:
            if not slot.retired:
                self.free.append(slot)
            self.condition.notify_all()

    def _add(self, slot: Slot) -> None:
        with self.condition:
            self.slots.append(slot)
            self.free.append(slot)
            self.condition.notify_all()

    def evaluate(self, op: str, kernel_path: Path, **options):
        """The Verdict; InfrastructureError when the sandbox failed before the kernel ran. A slot that
        fails so RETIRE_AFTER times in a row takes no more work (the batch goes on without it)."""
        while True:
            slot = self._take(self._accepts(op))
            slot.busy, slot.busy_since = op, time.time()
            failure = None
            try:
                verdict = self._run_on(slot, op, kernel_path, options)
                failure = verdict.infrastructure
                slot.model = slot.model or getattr(getattr(verdict, "environment", None), "gpu", None)
            except SlotLost as exc:  # not the kernel's doing: counted against the slot, then run again
                slot.lost += 1
                failure = str(exc)
                if exc.retire:
                    slot.retired = slot.retired or failure
                continue
            finally:
                slot.busy_s += time.time() - slot.busy_since
                slot.evaluations += 1
                slot.busy = None
                slot.failures_in_a_row = slot.failures_in_a_row + 1 if failure else 0
                if slot.failures_in_a_row >= RETIRE_AFTER:
                    slot.retired = slot.retired or f"{RETIRE_AFTER} sandbox failures in a row, the last: {failure}"
                self._give(slot)
            if failure:
                raise InfrastructureError(f"{slot.name}: {failure}")
            return verdict

    def activity(self) -> list[dict]:
        now = time.time()
        return [{"name": s.name, "busy": s.busy, "evaluations": s.evaluations,
                 "busy_s": round(s.busy_s + (now - s.busy_since if s.busy else 0.0), 3),
                 "since": round(self.started, 3), "retired": s.retired, "gpu_model": s.model, "lost": s.lost}
                for s in self.slots]

    def waiting_count(self) -> int:
        with self.condition:
            return len(self.waiting)


class LocalExecutor(SlotPool):
    """One slot per GPU in ``gpus`` (device ``cuda``), or ``cpu_slots`` slots on the CPU."""

    def __init__(self, device: str, gpus: list[int] | None = None, cpu_slots: int | None = None,
                 evaluate=None):
        self.device = device
        self.run_evaluation = evaluate  # harness.evaluate.evaluate unless a test gives another
        if device == "cpu":
            count = cpu_slots or os.cpu_count() or 1
            super().__init__([Slot(f"cpu-{n}", None, "cpu") for n in range(count)])
        else:
            super().__init__([Slot(f"gpu-{gpu}", gpu) for gpu in gpus or [0]])

    def _run_on(self, slot: Slot, op: str, kernel_path: Path, options: dict):
        if self.run_evaluation is None:
            from harness.evaluate import evaluate as run_evaluation
            self.run_evaluation = run_evaluation
        return self.run_evaluation(op, kernel_path, device=self.device, gpu=slot.gpu, **options)

    def gpu_label(self) -> str:
        if self.device == "cpu":
            return "cpu"
        from agent.machine import gpu_model
        return gpu_model()

    def close(self) -> None:
        pass  # the sandbox pools close at exit (harness.sandbox.pool)
