"""What the sandbox child tells its parent: one typed record per event kind, one JSON line each on
the result channel (a pipe of its own, never stdout, which the candidate may print into).

Both sides import this module: the child (``harness.sandbox.child.worker``, the timing phase, the
inductor and ncu children, the compile clock) sends events with ``Channel.send``; the parent reads
them back with ``decode`` (``harness.sandbox.parent.run``), stamped with its own clock in ``received_at``.
The standard library is all it needs. A test's, a timing's and a baseline's result travel as the
plain record the Verdict's model validates in the parent (``harness.verdict``).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar


@dataclass
class Event:
    KIND: ClassVar[str] = ""
    received_at: float = field(default=0.0, kw_only=True)  # the parent's clock when it read the event


@dataclass
class ChildEnvironment(Event):
    """The child is ready: where it runs and what with."""
    KIND: ClassVar[str] = "environment"
    device: str
    interpreter: bool
    gpu: str | None = None
    cuda_visible_devices: str | None = None
    torch: str | None = None
    triton: str | None = None
    python: str | None = None
    cuda: str | None = None
    startup_s: float | None = None
    ready_at: float | None = None  # time.time(), to measure the child's start from the parent
    containment: dict | None = None

    def reported(self) -> dict:
        """What the Verdict's ``environment`` holds of it."""
        return {k: v for k, v in asdict(self).items() if k not in ("received_at", "startup_s", "ready_at")}


@dataclass
class SuiteBuilt(Event):
    """The tests about to run: every case (id, source, input, dtype, overload), those skipped with why."""
    KIND: ClassVar[str] = "suite"
    cases: list[dict]
    skipped: list[dict]
    notes: list[str]
    overloads: list[str]
    kernel_for: str
    build_s: float
    reused: bool = False  # loaded from a suite built for an earlier evaluation (harness.suite.cache)
    saved_sha256: str | None = None  # this child saved the suite it built; the file's digest, sent before the candidate ran


@dataclass
class AheadCall(Event):
    """The kernel is called on this test's inputs up to its first launch, to compile ahead."""
    KIND: ClassVar[str] = "ahead_call"
    id: str


@dataclass
class CompiledAhead(Event):
    """Before a group of tests: the candidate called once per distinct input layout up to its first
    launch, whose kernel compiled in a thread pool (``harness.sandbox.child.compile_ahead``)."""
    KIND: ClassVar[str] = "compiled_ahead"
    calls: int
    launches: int  # calls that reached a launch (the others raised, or launched nothing)
    seconds: float
    stopped: str = ""  # why it stopped before the last call, if it did
    processes: int = 0  # compile processes forked (harness.sandbox.child.compile_processes)
    warmed: int = 0  # compilations one of them made first (the rest compiled in the threads alone)


@dataclass
class StoppedEarly(Event):
    """Fail fast (``harness.suite.tiers``): the candidate failed in the first tier (one test per
    class), ran what else fitted in its extra budget, and the rest did not run."""
    KIND: ClassVar[str] = "stopped_early"
    first_tier: int
    failing_classes: list[str]
    not_run: int
    budget_s: float


@dataclass
class Sealed(Event):
    """The file view the child sealed itself in before importing the candidate (``containment.seal``)."""
    KIND: ClassVar[str] = "sealed"
    details: dict


@dataclass
class Fatal(Event):
    """The evaluation cannot go on: the candidate failed to import, or the harness failed."""
    KIND: ClassVar[str] = "fatal"
    error_kind: str
    message: str


@dataclass
class Violation(Event):
    """The candidate broke a sandbox rule (network, a forbidden read or write, a process start)."""
    KIND: ClassVar[str] = "violation"
    error_kind: str
    message: str


@dataclass
class CaseStart(Event):
    KIND: ClassVar[str] = "test_start"
    id: str


@dataclass
class CandidateStart(Event):
    """The candidate runs now, on the test's inputs (a hang or crash from here on is the kernel's)."""
    KIND: ClassVar[str] = "candidate_start"
    id: str


@dataclass
class ReferenceStart(Event):
    """The candidate's call returned; the test's reference runs now, then the checks (a crash from here
    on is the harness's, until the candidate is called again)."""
    KIND: ClassVar[str] = "reference_start"
    id: str


@dataclass
class CaseResult(Event):
    KIND: ClassVar[str] = "test"
    record: dict  # harness.verdict.TestResult as data


@dataclass
class InUseStart(Event):
    """A check of the kernel as users run it starts (a crash or hang from here on is the kernel's)."""
    KIND: ClassVar[str] = "in_use_start"
    check: str


@dataclass
class InUse(Event):
    """One check of the kernel as users run it, once every test passed (``harness.checks.in_use``)."""
    KIND: ClassVar[str] = "in_use"
    record: dict  # harness.verdict.InUseCheck as data


@dataclass
class Done(Event):
    KIND: ClassVar[str] = "done"
    total_s: float
    phases: dict = field(default_factory=dict)  # seconds: start (containment, device), suite, seal, import, tests
    imported_sealed: list = field(default_factory=list)  # modules first imported after the seal, in order
    test_parts: dict = field(default_factory=dict)  # seconds of the tests phase by part (harness.stopwatch)
    device_memory_peak: int | None = None  # bytes: the most the child's allocator held (GPU only)
    memory_retries: int = 0  # tests run again after the harness's own work ran out of device memory
    memory_wait_s: float = 0.0  # the pauses before those retries
    gpu_pauses: int = 0  # times it paused at a checkpoint for another evaluation's time alone (harness.gpu_pause)
    gpu_paused_s: float = 0.0  # seconds those pauses lasted


@dataclass
class HelionConfigs(Event):
    """A Helion kernel's configs in this run (``harness.helion_configs``), sent before ``Done``:
    the table its tuning found (``tuned``), or how many specializations ran a pinned config and
    the calls that had none (``unseen``)."""
    KIND: ClassVar[str] = "helion_configs"
    tuned: str | None = None  # the table's JSON
    pinned: int = 0
    unseen: list[str] = field(default_factory=list)


@dataclass
class ExclusiveWanted(Event):
    """Every test passed: the child waits for the GPU to itself before its timing phase
    (``harness.sandbox.parent.gpu_share``), until the parent writes to its grant pipe."""
    KIND: ClassVar[str] = "exclusive_wanted"


@dataclass
class TimingPlan(Event):
    """The timing phase starts: the cases it times, the device's yardsticks."""
    KIND: ClassVar[str] = "timing_plan"
    ids: list[str]
    device: dict
    device_measured: bool
    gpu: str
    target_ms: float


@dataclass
class TimingStart(Event):
    KIND: ClassVar[str] = "timing_start"
    id: str


@dataclass
class Timing(Event):
    KIND: ClassVar[str] = "timing"
    record: dict  # harness.verdict.TimedTest as data; with an error_kind where the kernel failed being timed


@dataclass
class Profile(Event):
    """Profiler traces written in the child's directory for one case."""
    KIND: ClassVar[str] = "profile"
    id: str
    input: str
    files: list[str]
    launches: dict = field(default_factory=dict)  # side -> [{"name", "us", "per_call"}]: its GPU kernels, per call
    wall_s: float | None = None
    error: str | None = None


@dataclass
class Compile(Event):
    """Compilation or autotuning started (``phase`` start) or ended (end, with the running totals)."""
    KIND: ClassVar[str] = "compile"
    phase: str
    kind: str = ""
    totals: dict | None = None


@dataclass
class BaselineStart(Event):
    KIND: ClassVar[str] = "baseline_start"
    input: str


@dataclass
class Baseline(Event):
    KIND: ClassVar[str] = "baseline"
    record: dict  # one shape's inductor timing, or its error


@dataclass
class NcuRange(Event):
    """One profiled call under Nsight Compute: its NVTX range, case and side (eager or kernel)."""
    KIND: ClassVar[str] = "ncu_range"
    range: str
    id: str
    input: str
    side: str
    error: str | None = None


@dataclass
class Garbled(Event):
    """A line on the result channel that is no event (the parent's own record of it)."""
    KIND: ClassVar[str] = "garbled"
    line: str


KINDS = {kind.KIND: kind for kind in (ChildEnvironment, SuiteBuilt, Sealed, Fatal, Violation, CaseStart, CandidateStart,
                                      ReferenceStart, CaseResult, InUseStart, InUse, AheadCall, CompiledAhead, StoppedEarly, Done, HelionConfigs, ExclusiveWanted, TimingPlan,
                                      TimingStart, Timing, Profile, Compile, BaselineStart, Baseline, NcuRange,
                                      Garbled)}


def encode(event: Event) -> str:
    data = {f.name: getattr(event, f.name) for f in fields(event) if f.name != "received_at"}
    return json.dumps({"event": event.KIND, **data}, default=str)


def decode(line: str, received_at: float = 0.0) -> Event:
    """The event of one line; ``Garbled`` for a line that is none."""
    try:
        data = json.loads(line)
        return KINDS[data.pop("event")](**data, received_at=received_at)
    except (ValueError, KeyError, TypeError, AttributeError):
        return Garbled(line=line[:200], received_at=received_at)


def first(events: list[Event], kind: type[Event]):
    """The first event of ``kind``, or None."""
    return next((e for e in events if isinstance(e, kind)), None)


def of_kind(events: list[Event], kind: type[Event]) -> list:
    return [e for e in events if isinstance(e, kind)]


class Channel:
    """The child's end of the result channel: ``send(event)`` writes one line and flushes it, so
    the parent has every event up to the moment the child dies."""

    def __init__(self, fd: int):
        self.stream = os.fdopen(fd, "w", buffering=1)

    def send(self, event: Event) -> None:
        self.stream.write(encode(event) + "\n")
        self.stream.flush()
