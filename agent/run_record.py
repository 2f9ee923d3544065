"""A run's record, ``runs/<run_id>/run.json``, as one typed value.

The loop (``agent.generate.loop``) holds a ``RunRecord`` and rewrites run.json from it after every
step; everything that reads a run back (``bbagent runs``, the report, ``review``, a replay, a
batch on Ctrl-C or ``--resume``) reads it through ``RunRecord.read``, which validates it. Fields a
newer bbagent wrote are kept (``extra="allow"``), and run.json holds the fields that were set, so
its shape stays what it was: a round record names a speedup only where there was one.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from bbagent.agent.machine import process_state
from bbagent.agent.storage import write_json
from bbagent.harness.interface import Summary, TestCounts

FILE_NAME = "run.json"
RunStatus = Literal["running", "accepted", "failed", "stopped", "error", "interrupted"]


class StoppedBecause(str, Enum):
    """Why a run stopped (run.json's ``stopped_because``; a str, so it is written and compared as
    its value): optimisation reached a target, went ``--patience`` rounds without a better kernel,
    or had nothing timed to improve; the rounds ran out; the run's budget, a batch's, the provider,
    the machine that runs evaluations (``INFRASTRUCTURE``), the machine refusing a write (a full
    disk, a quota: ``MACHINE``), Ctrl-C or a bug (``ERROR``) ended it;
    or it never started: input it cannot take (``USAGE``), a provider it cannot set up (``SETUP``).
    ``RUNNING`` until one of them did."""
    RUNNING = "running"
    TARGET_SPEEDUP = "target_speedup"
    TARGET_ROOF = "target_roof"
    PATIENCE = "patience"
    UNTIMED = "untimed"
    ROUNDS = "rounds"
    BUDGET = "budget"
    BATCH_BUDGET = "batch_budget"
    PROVIDER_ERROR = "provider_error"
    INTERRUPTED = "interrupted"
    INFRASTRUCTURE = "infrastructure"
    MACHINE = "machine"
    ERROR = "error"
    USAGE = "usage"
    SETUP = "setup"

    def __str__(self) -> str:  # printed as its value, as run.json has it (not "StoppedBecause.PATIENCE")
        return self.value


@dataclass(frozen=True)
class Halt:
    """How a run ends, as every ending is said (a target reached, the rounds run out, a budget, a
    batch stopping its runs, Ctrl-C, the provider, a bug, input it cannot take): why
    (``because``), the run's message, and its status where the best kernel does not decide it
    (None: "accepted" with a correct kernel, else "failed"). ``transient``: the cause may pass (a
    provider outage, a lost GPU), so a batch tries the run again later."""
    because: StoppedBecause
    message: str
    status: RunStatus | None = None
    transient: bool = False


def one_line(text: str | None, width: int = 600) -> str:
    """``text`` on one line: its non-blank lines joined (a message such as "its source breaks these
    rules:" keeps the rules that follow), cut to ``width`` with "..." (verdict.json has it whole)."""
    line = " ".join(part.strip() for part in (text or "").splitlines() if part.strip())
    return line if len(line) <= width else line[:width - 3] + "..."


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=True)


class FailedKind(_Record):
    """One error kind of a failing kernel: how many tests failed with it and the first of them."""
    error_kind: str
    count: int
    first_test: str | None = None


class WhyFailed(_Record):
    """A failed run, as data: what the closest kernel got right and wrong, and what the answers lacked."""
    rounds: int
    best_round: int | None = None  # the round whose kernel passed most tests
    passed: int | None = None
    total: int | None = None
    error_kind: str | None = None  # the best kernel's failure when it is not one test's (compile error, timeout)
    message: str | None = None
    kinds: list[FailedKind] = []
    no_code_rounds: list[int] = []  # rounds whose answers held no code block
    provider_error_rounds: list[int] = []

    def text(self) -> str:
        parts = [f"no candidate passed in {self.rounds} round(s)"]
        if self.best_round is not None:
            best = f"closest: round {self.best_round}"
            if self.total:
                best += f", {self.passed}/{self.total} tests passed"
            if self.kinds:
                best += " (" + ", ".join(f"{k.error_kind} x{k.count}" + (f", first {k.first_test}" if k.first_test
                                                                         else "") for k in self.kinds) + ")"
            elif self.error_kind:
                best += f": {self.error_kind}" + (f": {one_line(self.message)}" if self.message else "")
            parts.append(best)
        elif not self.no_code_rounds and not self.provider_error_rounds:
            parts.append("no kernel was evaluated")
        if self.no_code_rounds:
            parts.append("no code block in the answer of round(s) " + ", ".join(map(str, self.no_code_rounds)))
        if self.provider_error_rounds:
            parts.append("provider errors in round(s) " + ", ".join(map(str, self.provider_error_rounds)))
        return "; ".join(parts)


class Usage(_Record):
    """One answer's tokens, time and price (``usage.json``; the provider's Completion is its text and this)."""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    model: str = ""
    attempts: int = 1
    response_id: str | None = None
    cached: bool = False  # answered from the call log, no network
    cost_usd: float | None = None  # None: the model has no price (agent.providers.prices)
    paid_by: str | None = None  # a cached answer: the run whose call paid for it


class CandidateRecord(_Record):
    """One candidate of a round: its outcome (``asking`` while the round waits, then the Verdict's
    ``pass``/``fail``/``error``, or ``no_code``, ``provider_error``, ``interrupted``), its tests and,
    when it passed and was timed, its geomean speedup over eager."""
    outcome: str
    usage: Usage | None = None
    summary: Summary | None = None
    error_kind: str | None = None
    message: str | None = None
    failures: list[FailedKind] = []  # the top error kinds, most tests first
    counts: TestCounts | None = None
    speedup: float | None = None
    profiling_s: float | None = None

    @property
    def tokens(self) -> tuple[int, int]:
        return (self.usage.input_tokens, self.usage.output_tokens) if self.usage is not None else (0, 0)


class RoundRecord(CandidateRecord):
    """A round: its picked candidate's record, and with several candidates each one's and which was picked."""
    round: int
    candidates: list[CandidateRecord] | None = None
    picked: int | None = None  # from 1

    def tried(self) -> list[CandidateRecord]:
        """Every candidate of the round (the round itself where it had one)."""
        return self.candidates or [self]


class DispatcherRecord(_Record):
    """A pair of kept kernels considered for a per-shape dispatcher after round ``after_round``, and
    what came of it (``not_tried``, ``cannot_merge``, ``evaluating``, or its Verdict's outcome)."""
    after_round: int
    parts: list[int]
    outcome: str | None = None
    reason: str | None = None
    rules: list[str] | None = None
    predicted_gain: float | None = None
    kernel: str | None = None
    speedup: float | None = None
    message: str | None = None
    kept: bool | None = None


class TuningRecord(_Record):
    """The tuning of the run's accepted Helion kernel once the rounds ended (``--autotune-budget``;
    ``agent.generate.tuning``): ``tuned`` (its configs kept and judged), ``untuned`` (no search found
    a config), ``slower`` (judged with them, it was slower), ``failed`` (the tuning run, or the kernel
    with its configs pinned, failed) or ``interrupted``; all but ``tuned`` leave the kernel's untuned
    configs. What the search spent, and the speed before and after."""
    budget_s: float
    outcome: str = "tuning"
    message: str = ""
    configs: int = 0
    spent_s: float | None = None
    speedup_untuned: float | None = None
    speedup_tuned: float | None = None


class Tokens(_Record):
    input: int = 0
    output: int = 0


class RunConfig(_Record):
    """The run's options (``GenerateOptions`` as given, less the replay source) and the provider
    and model that answered."""
    provider: str
    model: str | None = None


class RunRecord(_Record):
    """Everything run.json says about a run; ``status`` moves from ``running`` to ``accepted``,
    ``failed``, ``stopped``, ``error`` or ``interrupted``. Only ``op`` and ``status`` are required
    of a record read back (one written by hand, or by an early version, holds little more)."""
    op: str
    status: RunStatus
    run_id: str = ""  # its folder's name (read fills it in where the file lacks it)
    started_at: str | None = None
    finished_at: str | None = None
    config: RunConfig | None = None
    batch_id: str | None = None  # the batch the run belongs to, if any
    prompt_template: str | None = None
    serves: list[str] = []
    host: dict[str, str] = {}
    process: dict | None = None  # agent.machine.this_process: a run left running by a dead process is interrupted
    environment: dict | None = None  # the last Verdict's (torch, triton, device, GPU)
    tokens: Tokens = Tokens()
    cost_usd: float = 0.0
    cost_complete: bool = True
    cached_calls: int = 0
    answers_paid_by: list[str] = []  # the runs whose calls paid for the answers this run took from the call log
    rounds: list[RoundRecord] = []
    dispatchers: list[DispatcherRecord] = []
    tuning: TuningRecord | None = None  # the accepted Helion kernel tuned at the end (--autotune-budget)
    message: str = ""
    suite_ahead: dict | None = None  # how the test suite was built while the first answer was written
    why_failed: WhyFailed | None = None
    stopped_because: StoppedBecause = StoppedBecause.RUNNING
    rounds_used: int | None = None  # set when it ends
    accepted_dir: str | None = None
    best_round: int | None = None
    best_speedup: float | None = None
    best_fast_p: dict | None = None
    best_gpu: str | None = None
    best_baseline_speedups: dict | None = None

    @classmethod
    def read(cls, run_dir: Path) -> "RunRecord":
        """The record of the run in ``run_dir``; ``UnreadableRun`` saying why where there is none or
        it is not a run record."""
        path = Path(run_dir) / FILE_NAME
        try:
            data = json.loads(path.read_text())
            return cls.model_validate({"run_id": Path(run_dir).name, **data} if isinstance(data, dict) else data)
        except OSError as exc:
            raise UnreadableRun(f"cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:  # not JSON, or not a run record (ValidationError is a ValueError)
            detail = (f"{len(exc.errors())} field(s) wrong, first {_first_error(exc)}"
                      if isinstance(exc, ValidationError) else str(exc))
            raise UnreadableRun(f"{path} is not a bbagent run record: {detail}") from None

    def write(self, run_dir: Path) -> None:
        """run.json, as the fields set so far say (written whole and atomically)."""
        write_json(Path(run_dir) / FILE_NAME, self.model_dump(mode="json", exclude_unset=True))

    def mark_interrupted(self, message: str) -> bool:
        """A record still ``running`` says ``interrupted`` with ``message`` (True if it did run)."""
        if self.status != "running":
            return False
        self.status, self.message = "interrupted", message
        self.stopped_because = StoppedBecause.INTERRUPTED
        self.finished_at = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        return True


class UnreadableRun(ValueError):
    """A run directory whose run.json is missing, is not JSON or is not a run record."""


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(map(str, first['loc'])) or '(the whole file)'}: {first['msg'].lower()}"


def read_run(run_dir: Path) -> RunRecord | None:
    """The run's record, or None where its run.json is missing or is not a run record."""
    try:
        return RunRecord.read(run_dir)
    except UnreadableRun:
        return None


def mark_interrupted(run_dir: Path, message: str) -> bool:
    """A run whose process is being stopped while it runs: its run.json says so (True if it did say
    ``running``). Used by a batch on Ctrl-C, whose worker threads cannot finish their runs."""
    record = read_run(run_dir)
    if record is None or not record.mark_interrupted(message):
        return False
    record.write(run_dir)
    return True


def interrupt_lost_runs(runs_dir: Path, batch_id: str, since: float) -> list[str]:
    """For a batch's ``--resume``: the batch's runs (written since ``since``, a time.time()) whose
    run.json still says ``running`` although their process is gone (the coordinator was killed)
    say ``interrupted`` now; their ids. A run.json that is not a run record is left as it is."""
    lost = []
    for path in sorted(Path(runs_dir).glob(f"*/{FILE_NAME}")):
        try:
            if path.stat().st_mtime < since:
                continue
        except OSError:  # removed meanwhile
            continue
        record = read_run(path.parent)
        if record is not None and record.batch_id == batch_id and process_state(record.process) != "alive" and record.mark_interrupted(
                f"its process died with batch {batch_id}'s coordinator; --resume runs the operator again"):
            record.write(path.parent)
            lost.append(path.parent.name)
    return lost
