"""One evaluation's child, as the parent asks for it: the one job type both sides of the process
boundary use. The parent derives a ``Job`` from its request (``harness.request``, ``harness.after_tests``),
the sandbox sends it as JSON (``to_wire``) to the fork server or on a cold child's command line, and
the child reads it back (``from_wire``). What the child does is the Job's ``work``, one of four
kinds: a candidate's tests (and its timing, where asked), a suite built ahead, a compiled baseline,
an ncu run. Standard library only: both processes import it before torch.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import ClassVar

from bbagent.harness.suite.budget import CPU_MAX_NUMEL


@dataclass(frozen=True)
class Tests:
    """A candidate's tests; on the GPU, once every test passed, its timing where ``timing`` is set
    (a ``harness.timing.phase.TimingRequest`` as a dict)."""
    timing: dict | None = None
    kind: ClassVar[str] = "tests"


@dataclass(frozen=True)
class BuildSuite:
    """No candidate: build the suite, save it (``Job.save_suite``) and end (``harness.evaluate.prepare_suite``)."""
    kind: ClassVar[str] = "build_suite"


@dataclass(frozen=True)
class CompiledBaseline:
    """No candidate: time the compiled baseline (``harness.timing.inductor``) on ``shapes`` (input
    description, timing mode; a program's input None: its own inputs), skipping the ``cached``
    (GPU, input, mode) triples."""
    compile_mode: str
    target_ms: float
    shapes: list[dict]
    cached: list[list] = field(default_factory=list)
    kind: ClassVar[str] = "baseline"


@dataclass(frozen=True)
class NcuProfile:
    """No tests: the kernel and eager on the cases ``ids``, each in a range of its own, under Nsight
    Compute (``harness.timing.ncu``)."""
    ids: list[str]
    kind: ClassVar[str] = "ncu"


Work = Tests | BuildSuite | CompiledBaseline | NcuProfile
WORKS: dict[str, type[Work]] = {work.kind: work for work in (Tests, BuildSuite, CompiledBaseline, NcuProfile)}


@dataclass
class Job:
    """One evaluation, as the parent asks for it (``harness.request.EvaluationRequest.job``)."""
    problem: dict  # a harness.problem Problem's wire form: the child resolves it once (from_wire)
    kernel: str
    seed: int
    device: str
    workdir: str
    hidden: list[str] = field(default_factory=list)  # never shown, even inside an allowed directory
    tool_write_dirs: list[str] = field(default_factory=list)
    namespaces: bool = True
    cpu_max_numel: int = CPU_MAX_NUMEL
    work: Work = field(default_factory=Tests)  # what the child does
    extra_traces: dict = field(default_factory=dict)  # a dataset's inputs per operator name (harness.suite.build)
    channels_last: bool = False  # trace inputs also in channels-last layout (harness.layouts)
    network_namespace: bool = True  # False only under ncu, whose injected library reports over 127.0.0.1
    suite_file: str | None = None  # a suite built for an earlier evaluation, to load instead of building (harness.suite.cache)
    save_suite: str | None = None  # build the suite and save it here, for the parent to adopt
    fail_fast_s: float | None = None  # seconds of tests after a failing first tier (harness.suite.tiers); None: run every test
    profile: bool = False  # the tests run under cProfile, the costliest calls printed last on stderr (benchmarks/eval_cost.py)
    grant_fd: int | None = None  # the GPU is shared: before timing, ask for it alone and wait for a byte here (gpu_share)
    pause_fd: int | None = None  # the GPU is shared: pause at checkpoints while this page asks (harness.gpu_pause)
    in_use_calls: int | None = None  # the repeated-call check's calls (harness.checks.in_use); None: the device's default
    allow_library: str = "gemm"  # a program's answer: what it may leave to torch (harness.checks.program_compare)
    helion_configs: str | None = None  # a Helion kernel's tuned configs, pinned (harness.helion_configs.ConfigTable)

    @property
    def op(self) -> str:
        """The problem's one name (``Problem.key``): the overload tested and timed first, or a
        program's key."""
        return self.problem["key"]

    @property
    def timing(self) -> dict | None:
        """The timing asked for after a candidate's tests (None: none, or not a candidate's tests)."""
        return self.work.timing if isinstance(self.work, Tests) else None

    def to_wire(self, **extra) -> str:
        """As JSON, with ``extra`` fields the receiving side takes off first (the fork server's ``env``)."""
        return json.dumps({**asdict(self), "work": {"kind": self.work.kind, **asdict(self.work)}, **extra})

    @classmethod
    def from_wire(cls, text: str | dict) -> "Job":
        data = dict(json.loads(text) if isinstance(text, str) else text)
        work = dict(data.pop("work", {"kind": Tests.kind}))
        return cls(**data, work=WORKS[work.pop("kind")](**work))
