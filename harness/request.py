"""One evaluation as its caller asks for it: the ``EvaluationRequest``, frozen, made once and passed.

It holds everything that decides what the sandboxed child does and how the parent watches it: the
problem (``harness.problem``), the device, the seed, the limits, the timing settings and the
suite's shape. ``harness.evaluate`` takes it with a kernel file; ``job`` derives the child's
``Job`` (the wire form) from it, so that no setting is relayed as a keyword through the layers.
Where an evaluation runs (a GPU of a batch's executor, a shared GPU) is the executor's, not the
request's.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from bbagent.harness.problem import OperatorProblem, ProgramProblem, problem_from_wire, problem_to_test
from bbagent.harness.sandbox.job import Job, Tests
from bbagent.harness.sandbox.parent.watch import Limits
from bbagent.harness.suite.budget import CPU_MAX_NUMEL
from bbagent.harness.suite.tiers import EXTRA_AFTER_FAILURE_S
from bbagent.harness.timing.options import TimingOptions


def default_device() -> str:
    """``cuda`` where torch sees a CUDA device, else ``cpu`` (the Triton interpreter)."""
    import torch  # the parent may import torch; it never imports the candidate
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass(frozen=True)
class EvaluationRequest:
    """What to evaluate and how. ``seed`` None draws a fresh one per evaluation; ``timing`` asks for
    the timing phase (GPU, after every test passed); ``hidden`` paths stay out of the child's view
    even inside an allowed directory; ``extra_traces``: more trace inputs per operator name
    (``{"line": ..., "timed": bool}``, a dataset's); ``channels_last`` runs 4-d and 5-d trace inputs
    in that layout too; ``fail_fast_s``: seconds of tests after a failing first tier (None: all);
    ``namespaces``/``static_check``/``warm`` off only to test one layer of the sandbox alone;
    ``secrets`` are redacted from the Verdict besides the environment's; ``profile`` runs the tests
    under cProfile; ``in_use_calls``: the repeated-call check's calls (None: the device's default);
    ``allow_library``: what a program's answer may leave to torch (none, gemm, all); ``dsl``: the
    kernel language the answer was asked in (``harness.dsl``); ``helion_configs``: a Helion kernel's
    tuned configs to pin (``harness.helion_configs.ConfigTable``'s JSON);
    ``expected_bytes``: the device memory a shared GPU admits the evaluation by until a child of it
    measured its peak (None: from the traces, ``harness.suite.memory_need``)."""
    problem: OperatorProblem | ProgramProblem
    device: str
    seed: int | None = None
    timeout_s: float = 300.0
    limits: Limits = field(default_factory=Limits)
    timing: TimingOptions | None = None
    hidden: tuple[str, ...] = ()
    extra_traces: dict = field(default_factory=dict)
    channels_last: bool = False
    cpu_max_numel: int = CPU_MAX_NUMEL
    fail_fast_s: float | None = EXTRA_AFTER_FAILURE_S
    namespaces: bool = True
    static_check: bool = True
    warm: bool = True
    secrets: tuple[str, ...] = ()
    profile: bool = False
    in_use_calls: int | None = None
    allow_library: str = "gemm"
    dsl: str = "triton"  # the kernel language the answer was asked in (harness.dsl): what the static check asks of it
    helion_configs: str | None = None  # a Helion kernel's tuned configs, pinned in its child (harness.helion_configs)
    expected_bytes: int | None = None  # device memory expected before a child measured any (a program's, its facts')

    @classmethod
    def of(cls, op: str | OperatorProblem | ProgramProblem, *, device: str | None = None, kernel_for: str | None = None,
           family: bool = False, hidden=(), **settings) -> "EvaluationRequest":
        """A request for ``op`` (a name: ``problem_to_test`` with ``kernel_for`` and ``family``; or
        a problem made already) on ``device`` (default: ``default_device``), with these settings."""
        problem = problem_to_test(op, family=family).written_as(kernel_for or op) if isinstance(op, str) else op
        return cls(problem=problem, device=device or default_device(),
                   hidden=tuple(str(Path(p).resolve()) for p in hidden), **settings)

    @property
    def op(self) -> str:
        """The problem's name in the timing cache (``Problem.cache_key``)."""
        return self.problem.cache_key

    def without_profiles(self) -> "EvaluationRequest":
        """The same request with no profiler or Nsight Compute run (nothing would read them)."""
        if self.timing is None or not (self.timing.profile or self.timing.ncu):
            return self
        return dataclasses.replace(self, timing=dataclasses.replace(self.timing, profile=0, ncu=0))

    def tuning(self, budget_s: float) -> "EvaluationRequest":
        """The request that tunes a Helion kernel in its timing phase within ``budget_s`` seconds
        (``harness.helion_configs.Tuning``): no profiles, the time limit widened by twice the budget
        (the search's runs count on the test clock; its compilations do not)."""
        if self.timing is None:
            raise ValueError("tuning happens in the timing phase: a request without timing cannot tune")
        timing = dataclasses.replace(self.timing, autotune_s=budget_s, profile=0, ncu=0)
        return dataclasses.replace(self, timing=timing, timeout_s=self.timeout_s + 2 * budget_s)

    def pinned(self, configs: str) -> "EvaluationRequest":
        """The same request with a Helion kernel's tuned ``configs`` pinned."""
        return dataclasses.replace(self, helion_configs=configs)

    def suite_options(self) -> dict:
        """The fields that shape the suite: with the overloads and the device, a cached suite's key."""
        return {"cpu_max_numel": self.cpu_max_numel, "extra_traces": self.extra_traces,
                "channels_last": self.channels_last}

    def job(self, workdir: Path, tool_write_dirs: list[str], seed: int | None = None) -> Job:
        """What the child of this request is told: its files, what it may not see, where Triton
        writes, its problem and the settings that shape its suite and its tests."""
        return Job(problem=self.problem.to_wire(), kernel=str(workdir / "candidate.py"),
                   seed=seed if seed is not None else self.fresh_seed(), device=self.device, workdir=str(workdir),
                   hidden=list(self.hidden), tool_write_dirs=tool_write_dirs, namespaces=self.namespaces,
                   fail_fast_s=self.fail_fast_s, profile=self.profile, in_use_calls=self.in_use_calls,
                   allow_library=self.allow_library, helion_configs=self.helion_configs,
                   work=Tests(timing=self.timing.request(self.op) if self.timing else None), **self.suite_options())

    def fresh_seed(self) -> int:
        """The request's seed, or a new one where it has none."""
        return self.seed if self.seed is not None else fresh_seed()

    def to_wire(self, torch_version: str) -> dict:
        """Plain data for an evaluation on another machine, whose torch is ``torch_version``
        (``from_wire`` there): the problem by name, the timing cache's rows, not the cache."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**fields, "problem": self.problem.to_wire(), "limits": dataclasses.asdict(self.limits),
                "timing": self.timing.remote(self.op, torch_version) if self.timing else None}

    @classmethod
    def from_wire(cls, data: dict, device: str) -> "EvaluationRequest":
        """A request ``to_wire`` sent, to run on this machine's ``device``."""
        return cls(**{**data, "problem": problem_from_wire(data["problem"]), "device": device,
                      "limits": Limits(**data["limits"]), "hidden": tuple(data["hidden"]),
                      "secrets": tuple(data["secrets"]),
                      "timing": TimingOptions(**data["timing"]) if data["timing"] else None})


def fresh_seed() -> int:
    """A new seed for an evaluation that was given none."""
    return int.from_bytes(os.urandom(4), "little") % (2**31)
