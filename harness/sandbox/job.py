"""One evaluation's child, as the parent asks for it: the one job type both sides of the process
boundary use. The parent derives a ``Job`` from its request (``harness.request``, ``harness.after_tests``: a
candidate's tests, a suite built ahead, a compiled baseline, an ncu run), the sandbox sends it as
JSON (``to_wire``) to the fork server or on a cold child's command line, and the child reads it
back (``from_wire``). Standard library only: both processes import it before torch.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from bbagent.harness.suite.budget import CPU_MAX_NUMEL


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
    timing: dict | None = None  # a harness.timing.phase.TimingRequest as a dict; GPU only, after every test passed
    extra_traces: dict = field(default_factory=dict)  # a dataset's inputs per operator name (harness.suite.build)
    baseline: dict | None = None  # no candidate: time a compiled baseline instead (harness.timing.inductor)
    channels_last: bool = False  # trace inputs also in channels-last layout (harness.layouts)
    ncu: dict | None = None  # {"ids": [...]}: no tests; profile the kernel on these cases under ncu (harness.timing.ncu)
    network_namespace: bool = True  # False only under ncu, whose injected library reports over 127.0.0.1
    suite_file: str | None = None  # a suite built for an earlier evaluation, to load instead of building (harness.suite.cache)
    save_suite: str | None = None  # build the suite and save it here, for the parent to adopt
    fail_fast_s: float | None = None  # seconds of tests after a failing first tier (harness.suite.tiers); None: run every test
    profile: bool = False  # the tests run under cProfile, the costliest calls printed last on stderr (benchmarks/eval_cost.py)
    grant_fd: int | None = None  # the GPU is shared: before timing, ask for it alone and wait for a byte here (gpu_share)
    pause_fd: int | None = None  # the GPU is shared: pause at checkpoints while this page asks (harness.gpu_pause)
    in_use_calls: int | None = None  # the repeated-call check's calls (harness.checks.in_use); None: the device's default
    allow_library: str = "gemm"  # a program's answer: what it may leave to torch (harness.checks.program_compare)
    build_only: bool = False  # build the suite, save it (save_suite) and end: no candidate (harness.evaluate.prepare_suite)

    @property
    def op(self) -> str:
        """The problem's one name (``Problem.key``): the overload tested and timed first, or a
        program's key."""
        return self.problem["key"]

    def to_wire(self, **extra) -> str:
        """As JSON, with ``extra`` fields the receiving side takes off first (the fork server's ``env``)."""
        return json.dumps({**asdict(self), **extra})

    @classmethod
    def from_wire(cls, text: str | dict) -> "Job":
        return cls(**(json.loads(text) if isinstance(text, str) else text))
