"""What a generate run tells as it goes: one frozen dataclass per event, as the sandbox child's
``harness.events`` are for the parent.

A listener is called with one event at a time (``report(event)``) and tells them apart by type:
the console (``agent.reports.console.RoundReporter``) prints them, a batch's runner writes each into
its ``events.jsonl`` as ``run_<name>`` with ``fields()``. A listener written for the older
``report(name, data)`` form still works: ``listener`` wraps it.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Callable, ClassVar

if TYPE_CHECKING:  # pydantic models: imported by the loop, not by every listener that reads this module
    from bbagent.agent.run_record import CandidateRecord, DispatcherRecord, RoundRecord


@dataclass(frozen=True)
class Progress:
    """One event of a run; ``name`` is what ``events.jsonl`` and a two-argument listener call it."""
    name: ClassVar[str] = ""

    def fields(self) -> dict:
        """The event's fields as plain data (a round record as run.json writes it)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


def _plain(value):
    return value.model_dump(mode="json", exclude_unset=True) if hasattr(value, "model_dump") else value


@dataclass(frozen=True)
class Started(Progress):
    """The run has its directory and provider; ``serves`` are the overloads its kernel serves;
    ``variant_of`` the overload asked for instead of ``op``, a calling convention of it (None where
    ``op`` itself is asked for, and for a program)."""
    name: ClassVar[str] = "start"
    op: str
    computation: str
    serves: list[str]
    provider: str
    model: str
    rounds: int
    candidates: int
    run_dir: str
    variant_of: str | None = None


@dataclass(frozen=True)
class Asking(Progress):
    """Round ``round`` asks the model for ``candidates`` answers."""
    name: ClassVar[str] = "asking"
    round: int
    rounds: int
    candidates: int


@dataclass(frozen=True)
class Retrying(Progress):
    """A call failed for a reason that may pass; the provider waits ``wait_s`` and tries again."""
    name: ClassVar[str] = "retry"
    attempt: int
    attempts: int
    wait_s: float
    error: str
    status: int | None = None  # the HTTP status, where there was one


@dataclass(frozen=True)
class Evaluating(Progress):
    name: ClassVar[str] = "evaluating"
    round: int
    candidate: int  # from 1
    candidates: int


@dataclass(frozen=True)
class CandidateJudged(Progress):
    """One candidate of a round of several (or one whose call failed), with its round record."""
    name: ClassVar[str] = "candidate"
    round: int
    candidate: int  # from 1
    record: CandidateRecord


@dataclass(frozen=True)
class RoundDone(Progress):
    """A round's record (run.json's): the picked candidate's outcome, tests, speedup, usage."""
    name: ClassVar[str] = "round"
    round: int
    rounds: int
    record: RoundRecord


@dataclass(frozen=True)
class NewBest(Progress):
    """Round ``round``'s kernel (or a dispatcher between two rounds') beats round ``replaces``'."""
    name: ClassVar[str] = "best"
    round: int
    speedup: float | None
    replaces: int
    dispatcher_of: list[int] | None = None


@dataclass(frozen=True)
class Tuning(Progress):
    """The rounds ended: round ``round``'s accepted Helion kernel is tuned within ``budget_s`` seconds."""
    name: ClassVar[str] = "tuning"
    round: int
    budget_s: float


@dataclass(frozen=True)
class TuningDone(Progress):
    """How the tuning ended (run.json's ``tuning``)."""
    name: ClassVar[str] = "tuning_done"
    outcome: str
    message: str
    speedup_untuned: float | None
    speedup_tuned: float | None


@dataclass(frozen=True)
class DispatcherTried(Progress):
    """A dispatcher between the kernels of rounds ``parts`` is being evaluated."""
    name: ClassVar[str] = "dispatcher"
    round: int
    parts: list[int]
    rules: list[str]


@dataclass(frozen=True)
class DispatcherDone(Progress):
    """What came of a pair considered for a dispatcher: run.json's ``dispatchers`` entry, whose
    fields are the event's fields."""
    name: ClassVar[str] = "dispatcher_done"
    record: DispatcherRecord

    def fields(self) -> dict:
        return self.record.model_dump(mode="json")


@dataclass(frozen=True)
class SameKernel(Progress):
    """The accepted kernel is the same code as the current version: kept, no new version."""
    name: ClassVar[str] = "same_kernel"
    round: int
    version: int
    status: str
    run_id: str | None


@dataclass(frozen=True)
class ReplacedApproved(Progress):
    """The accepted kernel replaces an approved version as the current one."""
    name: ClassVar[str] = "replaced_approved"
    round: int
    version: int
    status: str
    where: str
    run_id: str | None = None


@dataclass(frozen=True)
class ProbingDevice(Progress):
    """The GPU is being probed for the first prompt (``agent.gpu_facts``: once per GPU model and stack)."""
    name: ClassVar[str] = "probing_device"


@dataclass(frozen=True)
class DeviceProbed(Progress):
    """The probe ended: the GPU it described, or why it failed (the prompt then says nothing of the device)."""
    name: ClassVar[str] = "device_probed"
    gpu: str | None
    seconds: float
    failure: str | None = None

    def line(self) -> str:
        if self.gpu is not None:
            return f"probed the GPU for the prompt in {self.seconds:g} s: {self.gpu}"
        return f"the GPU could not be probed ({self.failure}); the prompt says nothing of the device"


@dataclass(frozen=True)
class DatasetInputs(Progress):
    """After a batch's run: how many of the dataset's inputs for the operator ran as tests, and why
    the others did not (told by the batch, through the run's listener)."""
    name: ClassVar[str] = "dataset_inputs"
    ran: int
    not_run: int
    why_not: str


Listener = Callable[[Progress], None]


def ignore(event: Progress) -> None:
    """The listener of a run nobody watches."""


def listener(report: Callable | None) -> Listener:
    """``report`` as a one-argument listener: None hears nothing; a callable that takes two
    positional arguments (the older ``report(name, data)``) gets each event's name and fields."""
    if report is None:
        return ignore
    try:
        parameters = [p for p in inspect.signature(report).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):  # no signature to read (a builtin): called as documented
        return report
    if len(parameters) == 2:
        return lambda event: report(event.name, event.fields())
    return report
