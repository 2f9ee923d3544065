"""Where a batch's evaluations run. The agent loop asks an executor to evaluate a kernel file and
waits for the Verdict; it never knows where the evaluation ran. ``LocalExecutor`` runs them on this
machine, several per GPU sharing it by phase (``harness.sandbox.parent.gpu_share``: tests side by side as
memory allows, a timing alone), each GPU with its own pinned sandbox pool; ``agent.batch.ray_executor.RayExecutor`` runs them on the GPUs of a Ray cluster. Both
hand out their slots as ``SlotPool`` does: a free slot takes the next waiting candidate, first come
first served, among the slots that candidate accepts.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Generic, Protocol, TypeVar

from bbagent.agent.batch.shared_gpu import SharedGpu, evaluations_per_gpu
from bbagent.agent.errors import InfrastructureError
from bbagent.agent.machine import gpu_model
from bbagent.harness.interface import Evaluator, evaluate_kernel, prepare_suite


class Executor(Evaluator, Protocol):
    """A batch's ``harness.interface.Evaluator`` (prepare, evaluate), with its slots' accounts."""

    def finished(self, op: str) -> None:
        """The batch is done with ``op`` for now: what the executor keeps for its evaluations may go."""
        ...

    def activity(self) -> list[dict]:
        """Per slot (a GPU, or a CPU worker): name, busy (the op it evaluates, or None),
        evaluations, busy_s (seconds spent evaluating since ``since``, the executor's start)."""

    def gpu_label(self) -> str:
        """The GPU model(s) evaluations run on ("cpu" for the interpreter): part of the resume key."""

    def gpus(self) -> list[dict]:
        """Per GPU: name, gpu_model, evaluations, per_hour, at_once (evaluations sharing it),
        waited_s (for admission and for the GPU alone), queued_s (for a free evaluation slot, every
        slot busy); where NVML is had, the samples' utilization_mean, busy_share (share of seconds
        with a kernel running), memory_peak_gib."""

    def close(self) -> None:
        """Let go of what the executor holds."""


RETIRE_AFTER = 3  # sandbox failures in a row on one slot before it is taken out (a lost GPU)


Gpu = TypeVar("Gpu", int, str)  # what names a slot's GPU: its number here, its supervisor on a cluster


class SlotLost(RuntimeError):
    """The evaluation was lost with its slot's process (``retire``: with its node, for good); it
    runs again, on another slot where one is free first."""

    def __init__(self, message: str, retire: bool = False, counted: bool = False):
        super().__init__(message)
        self.retire = retire
        self.counted = counted  # the same loss was counted already (another evaluation on the slot's GPU)


class Slot(Generic[Gpu]):
    """One evaluation at a time, on ``gpu`` (a local GPU's number, a cluster's supervisor; None: the
    CPU): what it is doing, what it did, and whether it is out of service."""

    def __init__(self, name: str, gpu: Gpu | None, model: str | None = None):
        self.name, self.model = name, model
        self.gpu: Gpu | None = gpu
        self.busy: str | None = None
        self.busy_since = 0.0
        self.busy_s = 0.0
        self.evaluations = 0
        self.failures_in_a_row = 0
        self.retired: str | None = None  # why it takes no more work
        self.lost = 0  # evaluations it lost in flight (they ran again elsewhere)
        self.waited_s = 0.0  # its evaluations' waits for the GPU (admission, the GPU alone for timing)
        self.queued_s = 0.0  # how long its evaluations waited for it to be free (more work than slots)


S = TypeVar("S", bound="Slot[Any]")


class SlotPool(Generic[S]):
    """Slots and the evaluations waiting for one, in arrival order. A waiting evaluation takes the
    first free slot it accepts that no evaluation ahead of it accepts; ``evaluate`` runs it there
    (``_run_on``, each executor's own), takes a slot out after RETIRE_AFTER sandbox failures in a
    row, and runs an evaluation whose slot was lost (``SlotLost``) again on another."""

    def __init__(self, slots: list[S]):
        self.slots = slots
        self.free = list(slots)
        self.waiting: list[tuple[object, Callable[[S], bool]]] = []  # (ticket, accepts), in arrival order
        self.condition = threading.Condition()
        self.started = time.time()

    def _run_on(self, slot: S, request, kernel_path: Path):
        raise NotImplementedError

    def _accepts(self, op: str) -> Callable[[S], bool]:
        return lambda slot: True

    def _same_device(self, slot: S) -> list[S]:
        """The slots that go with ``slot`` when it is taken out: those sharing its GPU (``Slot.gpu``,
        a local GPU's number or a cluster's supervisor); a slot of no GPU alone."""
        return [s for s in self.slots if s.gpu == slot.gpu] if slot.gpu is not None else [slot]

    def _no_slot_left(self) -> None:
        """Called when every slot is out of service, before giving up (a cluster may find new ones)."""

    def finished(self, op: str) -> None:
        """``Executor.finished``: a pool of slots keeps nothing per operator."""

    def _granted(self) -> dict[object, S]:
        free, granted = list(self.free), {}
        for ticket, accepts in self.waiting:
            slot = next((s for s in free if not s.retired and accepts(s)), None)
            if slot is not None:
                free.remove(slot)
                granted[ticket] = slot
        return granted

    def _take(self, accepts: Callable[[S], bool]) -> S:
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

    def _give(self, slot: S) -> None:
        with self.condition:
            if not slot.retired:
                self.free.append(slot)
            self.condition.notify_all()

    def _add(self, slot: S) -> None:
        with self.condition:
            self.slots.append(slot)
            self.free.append(slot)
            self.condition.notify_all()

    def evaluate(self, request, kernel_path: Path):
        """The Verdict; InfrastructureError when the sandbox failed before the kernel ran. A slot (with
        the slots sharing its GPU) that fails so RETIRE_AFTER times in a row takes no more work (the
        batch goes on without it)."""
        op = request.op
        while True:
            asked = time.time()
            slot = self._take(self._accepts(op))
            slot.busy, slot.busy_since = op, time.time()
            slot.queued_s += slot.busy_since - asked  # for a free slot; the GPU's own gate's waits are below
            failure, counted_already = None, False
            try:
                verdict = self._run_on(slot, request, kernel_path)
                failure = verdict.infrastructure
                slot.waited_s += getattr(getattr(verdict, "timings", None), "gpu_wait_s", 0.0) or 0.0
                slot.model = slot.model or getattr(getattr(verdict, "environment", None), "gpu", None)
            except SlotLost as exc:  # not the kernel's doing: counted against the slot, then run again
                slot.lost += 1
                failure, counted_already = str(exc), exc.counted
                if exc.retire:  # with every slot sharing its GPU (a lost node's)
                    for same in self._same_device(slot):
                        same.retired = same.retired or failure
                continue
            finally:
                slot.busy_s += time.time() - slot.busy_since
                slot.evaluations += 1
                slot.busy = None
                device = self._same_device(slot)  # a lost GPU fails every slot sharing it: counted together
                if not counted_already:  # one loss of several evaluations at once counts once
                    for same in device:
                        same.failures_in_a_row = same.failures_in_a_row + 1 if failure else 0
                if slot.failures_in_a_row >= RETIRE_AFTER:
                    for same in device:
                        same.retired = same.retired or f"{RETIRE_AFTER} sandbox failures in a row, the last: {failure}"
                self._give(slot)
            if failure:
                raise InfrastructureError(f"{slot.name}: {failure}")
            return verdict

    def activity(self) -> list[dict]:
        now = time.time()
        return [{"name": s.name, "busy": s.busy, "evaluations": s.evaluations,
                 "busy_s": round(s.busy_s + (now - s.busy_since if s.busy else 0.0), 3),
                 "since": round(self.started, 3), "retired": s.retired, "gpu_model": s.model, "lost": s.lost,
                 "gpu": s.gpu, "waited_s": round(s.waited_s, 3), "queued_s": round(s.queued_s, 3)}
                for s in self.slots]

    def gpus(self) -> list[dict]:
        """Per GPU: what its evaluations did and (where measured) how busy the GPU itself was."""
        return []


class LocalExecutor(SlotPool[Slot[int]]):
    """``per_gpu`` slots per GPU in ``gpus`` (device ``cuda``; default
    ``agent.batch.shared_gpu.evaluations_per_gpu``), each GPU a ``SharedGpu`` (tests side by side as
    memory allows, timing alone), or ``cpu_slots`` slots on the CPU."""

    def __init__(self, device: str, gpus: list[int] | None = None, cpu_slots: int | None = None,
                 evaluate=None, per_gpu: int | None = None):
        self.device = device
        self.run_evaluation = evaluate  # harness.interface.evaluate_kernel unless a test gives another
        self.shared: dict[int, SharedGpu] = {}  # GPU -> its gate and samples
        if device == "cpu":
            count = cpu_slots or os.cpu_count() or 1
            super().__init__([Slot(f"cpu-{n}", None, "cpu") for n in range(count)])
            return
        gpus = gpus or [0]
        per_gpu = per_gpu or evaluations_per_gpu(len(gpus))
        super().__init__([Slot(f"gpu-{gpu}" if per_gpu == 1 else f"gpu-{gpu}/{n}", gpu)
                          for gpu in gpus for n in range(per_gpu)])
        self.shared = {gpu: SharedGpu(f"gpu-{gpu}", gpu, per_gpu, evaluate=evaluate) for gpu in gpus}

    def gpus(self) -> list[dict]:
        return gpu_rows(self.slots, self.started, {gpu: (f"gpu-{gpu}", shared.figures())
                                                   for gpu, shared in self.shared.items()})

    def _run_on(self, slot: Slot[int], request, kernel_path: Path):
        if slot.gpu in self.shared:
            return self.shared[slot.gpu].evaluate(request, kernel_path)
        if self.run_evaluation is None:
            self.run_evaluation = evaluate_kernel
        return self.run_evaluation(request, kernel_path, gpu=slot.gpu)

    def prepare(self, request) -> str:
        """The request's suite built on a slot of its own (the build runs references on the GPU),
        so that the operator's first evaluation loads it."""
        slot = self._take(self._accepts(request.op))
        try:
            if slot.gpu in self.shared:
                return self.shared[slot.gpu].prepare(request)
            return prepare_suite(request, gpu=slot.gpu)
        finally:
            self._give(slot)

    def gpu_label(self) -> str:
        if self.device == "cpu":
            return "cpu"
        return gpu_model()

    def close(self) -> None:
        for shared in self.shared.values():
            shared.close()  # the sandbox pools close at exit (harness.sandbox.parent.pool)


def gpu_rows(slots: Sequence[Slot[Any]], started: float, shared: dict[object, tuple[str, dict]]) -> list[dict]:
    """``Executor.gpus``: per shared GPU (key -> its name and ``SharedGpu.figures``), what the
    slots on it did (evaluations, per hour, waits for the GPU and for a free slot) beside what the
    GPU measured of itself."""
    hours = max(time.time() - started, 1e-9) / 3600
    rows = []
    for key, (name, figures) in shared.items():
        on_it = [s for s in slots if s.gpu == key]
        evaluations = sum(s.evaluations for s in on_it)
        rows.append({"name": name, "gpu_model": next((s.model for s in on_it if s.model), None),
                     "evaluations": evaluations, "per_hour": round(evaluations / hours, 1),
                     "waited_s": round(sum(s.waited_s for s in on_it), 1),
                     "queued_s": round(sum(s.queued_s for s in on_it), 1), "at_once": len(on_it), **figures})
    return rows


def node_rows(gpus: list[dict]) -> list[dict]:
    """A cluster's GPUs (rows with a ``node``, ``RayExecutor.gpus``) added up per node: its GPUs,
    evaluations and evaluations per hour, and the mean utilization of those sampled."""
    nodes: dict[str, list[dict]] = {}
    for gpu in gpus:
        if gpu.get("node"):
            nodes.setdefault(gpu["node"], []).append(gpu)
    rows = []
    for node, on_it in nodes.items():
        sampled = [g for g in on_it if g.get("samples")]
        rows.append({"node": node, "gpus": len(on_it), "evaluations": sum(g["evaluations"] for g in on_it),
                     "per_hour": sum(g["per_hour"] for g in on_it), "sampled": len(sampled),
                     "utilization_mean": sum(g["utilization_mean"] for g in sampled) / len(sampled) if sampled else None})
    return rows
