"""What a batch tells as it goes: one frozen dataclass per event, as ``agent.generate.progress``
is for one run (the same base, so one ``listener`` serves both).

The coordinator (``agent.batch.runner.Batch.event``) writes each into ``runs/<batch>/events.jsonl``
as ``{"time", "event": name, **fields()}`` and hands it to the batch's listener: the CLI's display
(``agent.batch.display``) tells them apart by type; a two-argument ``report(name, data)`` gets each
one's name and fields, as it always did. ``Activity`` (the live snapshot, every 2 s) is heard but
not logged: the ledger keeps the latest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bbagent.agent.generate.progress import Progress


@dataclass(frozen=True)
class BatchStarted(Progress):
    """A session of the batch starts (the first, or a resume's): its operators' counts and jobs."""
    name: ClassVar[str] = "batch_start"
    counts: dict
    jobs: int
    session: int  # from 1
    deadline: float | None = None  # time.time() after which nothing new starts


@dataclass(frozen=True)
class DatasetChosen(Progress):
    """A dataset's rows became the operators' extra inputs; ``reasons`` counts the inputs left out."""
    name: ClassVar[str] = "dataset"
    rows: int
    ops: int
    pairs_used: int
    canaries: int  # inputs tested for correctness only (not timed)
    skipped: int
    reasons: dict
    file: str


@dataclass(frozen=True)
class Resumed(Progress):
    """``--resume``: the operators pending again, by why (``agent.batch.ledger.Ledger.reopen``)."""
    name: ClassVar[str] = "resume"
    interrupted: list[str]
    lease_expired: list[str]
    still_leased: list[str]
    other_key: list[str]
    failed: list[str]


@dataclass(frozen=True)
class CoordinatorLost(Progress):
    """The batch's last coordinator died without ending its session (found so by a resume)."""
    name: ClassVar[str] = "coordinator_lost"
    coordinator: dict | None
    last_heartbeat: float
    reason: str
    running: list[str]


@dataclass(frozen=True)
class RunsInterrupted(Progress):
    """Runs a lost coordinator left saying ``running`` now say ``interrupted`` in their run.json."""
    name: ClassVar[str] = "runs_interrupted"
    runs: list[str]


@dataclass(frozen=True)
class WorkdirsRemoved(Progress):
    """Working folders that ended bbagent processes left behind were removed."""
    name: ClassVar[str] = "workdirs_removed"
    folders: int
    bytes: int


@dataclass(frozen=True)
class OpStarted(Progress):
    name: ClassVar[str] = "op_start"
    op: str


@dataclass(frozen=True)
class OpEnded(Progress):
    """An operator's attempt ended as the ledger now has it (``accepted``, ``failed``, ``interrupted``)."""
    name: ClassVar[str] = "op_end"
    op: str
    state: str
    error_class: str | None = None
    rounds: int | None = None
    run_id: str | None = None
    best_speedup: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class OpRetried(Progress):
    """Not the operator's fault (provider, sandbox): pending again after a pause every worker shares."""
    name: ClassVar[str] = "op_retry"
    op: str
    error_class: str
    error: str
    pause_s: float


@dataclass(frozen=True)
class OpInterrupted(Progress):
    """Ctrl-C or SIGTERM stopped the operator's run mid-step."""
    name: ClassVar[str] = "op_interrupted"
    op: str
    run_dir: str | None = None


@dataclass(frozen=True)
class BudgetSpent(Progress):
    """A batch budget is spent: nothing new starts; running operators stop before their next round."""
    name: ClassVar[str] = "budget_spent"
    reason: str


@dataclass(frozen=True)
class BatchEnded(Progress):
    name: ClassVar[str] = "batch_end"
    counts: dict
    interrupted: bool


@dataclass(frozen=True)
class Activity(Progress):
    """What is happening now (``agent.batch.runner.Batch.activity``): heard by the live panel, its
    fields the snapshot itself."""
    name: ClassVar[str] = "activity"
    snapshot: dict

    def fields(self) -> dict:
        return dict(self.snapshot)


@dataclass(frozen=True)
class RunProgress(Progress):
    """One event of an operator's run, logged as ``run_<its name>`` with its small fields
    (``outcome`` for a round's record: large values such as prompts stay in the run's folder)."""
    op: str
    event: Progress

    @property
    def name(self) -> str:  # type: ignore[override]  # the run event's, prefixed
        return "run_" + self.event.name

    def fields(self) -> dict:
        data = self.event.fields()
        small = {k: v for k, v in data.items()
                 if k != "op" and isinstance(v, (str, int, float, bool, type(None))) and len(str(v)) < 500}
        if isinstance(data.get("record"), dict):  # a round's record: its outcome is what the batch shows
            small["outcome"] = data["record"].get("outcome")
        return {"op": self.op, **small}
