"""The Verdict: one document per evaluated candidate, as a typed model.

Everything downstream (feedback prompts, storage, reports, the benchmark records) reads this one
shape: ``Verdict`` below, written to JSON with ``model_dump_json`` and read back with
``model_validate_json``; ``bbagent schema verdict`` prints its JSON schema. The parent process
assembles it (``harness.evaluate``) from what the sandbox child reported; the child itself never
imports this module (it needs only the standard library, torch, triton and numpy).

Top level: ``schema_version``, ``op``, ``kernel`` {path, sha256}, ``verdict`` ("pass" | "fail"),
``error_kind`` and ``message`` (for failures that are not one test's: import error, timeout,
crash, no tests), ``infrastructure`` (set, with the cause, where the machine failed and not the
kernel), ``seed``, ``summary`` (counts), ``tests`` (one result per test run),
``skipped`` (tests not run, each with a reason), ``failure_groups`` (identical failures merged),
``guard_findings``, ``performance`` (the timing phase, GPU only), ``suite`` (notes on what the
suite holds), ``kernel_for`` and ``variants`` (the overloads tested), ``timings``,
``environment``, ``exit``, ``stderr_tail``, ``stdout_tail``, ``redactions``.
"""
from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bbagent.harness.error_kinds import ErrorKind

SCHEMA_VERSION = 1

Value = bool | int | float | str | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KernelFile(_Strict):
    path: str
    sha256: str


class Mismatch(_Strict):
    index: list[int]
    expected: Value
    actual: Value


class GuardFinding(_Strict):
    guard: str
    message: str
    line: int | None = None
    op: str | None = None


class TestResult(_Strict):
    """One test: ``passed`` is None when the reference rejected the input (``reference_error``)."""
    id: str
    source: str | None = None
    input: str | None = None
    dtype: str | None = None
    overload: str | None = None
    passed: bool | None
    error_kind: ErrorKind | None = None
    message: str = ""
    duration_ms: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatch_count: int | None = None
    numel: int | None = None
    tolerance_used: float | None = None  # passing: largest error as a fraction of the dtype tolerance (compare.tolerance_used)
    mismatches: list[Mismatch] = []
    guard_findings: list[GuardFinding] = []
    # where aten's own in-place or out= kernel disagreed with its functional result on this input:
    # what the expected value was taken from instead
    reference: str | None = None
    aten_calls: dict[str, int] = {}  # a program's answer: the aten operators it called outside Triton launches
    # and what each was (harness.checks.program_compare.CALL_KINDS): compute refused or left to torch by
    # the library policy, bookkeeping of the module's own integer state, or plumbing (views, allocation)
    aten_call_kinds: dict[str, Literal["compute", "library", "bookkeeping", "plumbing"]] = {}


class InUseCheck(_Strict):
    """One check of the kernel as users run it (``harness.checks.in_use``): ``launch_replay``,
    ``repeated_calls``, ``cuda_graph`` (or ``all``, where none applies); ``passed`` is None where
    the check could not be made (the note says why)."""
    check: Literal["launch_replay", "repeated_calls", "cuda_graph", "all"]
    passed: bool | None
    id: str | None = None
    input: str | None = None
    calls: int | None = None
    seconds: float | None = None
    error_kind: ErrorKind | None = None
    message: str = ""
    note: str = ""


class Skipped(_Strict):
    id: str
    reason: str
    input: str | None = None
    numel: int | None = None
    overload: str | None = None


class Summary(_Strict):
    planned: int
    not_run: int
    total: int
    passed: int
    failed: int
    reference_errors: int
    skipped: int
    not_run_reason: str | None = None  # why planned tests did not run (fail fast: harness.suite.tiers)
    failing_classes: list[str] = []  # fail fast: the classes of tests that failed in the first tier


class TestCounts(_Strict):
    """A kernel's tests counted one way everywhere: every overload it was tested as (the family's),
    its own overload's beside them, and the tests not run here (on the CPU interpreter: GPU-sized
    inputs and bfloat16, which only a GPU runs)."""
    passed: int
    total: int
    overloads: int = 1
    own_op: str | None = None
    own_passed: int | None = None
    own_total: int | None = None
    not_run_here: int = 0
    interpreter: bool = False

    def text(self) -> str:
        """``141/141 tests passed (3 overloads; 38/38 of aten.relu.default's own); 708 not run here (...)``."""
        return count_text(self.model_dump())


def count_text(counts: dict) -> str:
    """:meth:`TestCounts.text` from its fields as data (a meta.json's ``tests``); a summary without
    them (older files) still reads ``passed/total``."""
    line = f"{counts.get('passed')}/{counts.get('total')} tests passed" if counts.get("total") != 0 else \
        "no test ran"  # the kernel's file did not import, or the run ended before its first test
    if (counts.get("overloads") or 1) > 1 and counts.get("own_total") is not None:
        line += (f" ({counts['overloads']} overloads; {counts['own_passed']}/{counts['own_total']} of "
                 f"{counts['own_op']}'s own)")
    not_run = counts.get("not_run_here", counts.get("skipped")) or 0
    if not_run:
        line += (f", {not_run} not run here (GPU-sized or bfloat16: a GPU runs them)"
                 if counts.get("interpreter") else f", {not_run} skipped")
    return line


def short_count(counts: dict) -> str:
    """``141/141`` for a table, with ``+708 not run`` where tests were not run here."""
    not_run = counts.get("not_run_here", counts.get("skipped")) or 0
    return f"{counts.get('passed', '?')}/{counts.get('total', '?')}" + (f" +{not_run} not run" if not_run else "")


class FailureGroup(_Strict):
    error_kind: ErrorKind
    count: int
    tests: list[str]
    example: TestResult


class TimingStats(_Strict):
    """Per-repetition times of one function on one input, in ms (``harness.timing.clock.summarize``)."""
    median_ms: float
    mean_ms: float
    std_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    reps: int


class Launch(_Strict):
    """One GPU kernel (or copy, or memset) a call runs, from the torch profiler."""
    name: str
    us: float  # its time per call
    per_call: float  # launches per call


class BaselineTiming(_Strict):
    """A compiled baseline on one timed shape (``harness.timing.baselines``): its timing and the
    kernel's speedup over it, or the ``error`` that left it without one (never a 1.0x)."""
    compile_mode: str
    source: Literal["measured", "cache"]
    timing: TimingStats | None = None
    raw: list[float] | None = None
    eager_over_inductor: float | None = None  # eager median / inductor median, timed together
    compile_s: float | None = None
    speedup: float | None = None
    error: str | None = None
    launches: list[Launch] | None = None  # a program's: the GPU kernels of one call of the compiled code


class TimedTest(_Strict):
    """One timed trace input; a kernel that went wrong while timed has ``error_kind`` instead."""
    id: str
    input: str
    dtype: str | None = None
    mode: Literal["graph", "eager"] | None = None
    aten: TimingStats | None = None
    aten_source: Literal["measured", "cache"] | None = None
    candidate: TimingStats | None = None
    candidate_raw: list[float] | None = None
    aten_raw: list[float] | None = None
    speedup: float | None = None
    bytes: int | None = None
    candidate_gbs: float | None = None
    aten_gbs: float | None = None
    overhead_dominated: bool | None = None
    # the roofline (harness.timing.roofline): FLOPs, the ceiling that bounds the shape, its floor time,
    # and floor / median time for the kernel and for eager
    flops: int | None = None
    bound: Literal["memory", "compute"] | None = None
    floor_ms: float | None = None
    roof_fraction: float | None = None
    aten_roof_fraction: float | None = None
    candidate_tflops: float | None = None
    baselines: dict[str, BaselineTiming] | None = None
    error_kind: ErrorKind | None = None
    message: str | None = None


class DeviceYardsticks(_Strict):
    empty_launch_ms: float
    empty_graph_launch_ms: float
    copy_gbs: float
    matmul_tflops: dict[str, float] | None = None  # per dtype (float32, float16, bfloat16): a large torch.mm


class OverheadDominated(_Strict):
    count: int
    geomean_speedup: float | None


class LargestShape(_Strict):
    input: str
    bytes: int
    bandwidth_fraction: float
    aten_bandwidth_fraction: float


class PerformanceSummary(_Strict):
    """``harness.timing.metrics.summarize_performance``: failures never count as 1.0x."""
    correct: bool
    timed: int
    counted: int
    geomean_speedup: float | None
    speedup_p20: float | None
    speedup_p50: float | None
    speedup_p80: float | None
    fast_p: dict[str, float]
    overhead_dominated: OverheadDominated
    memory_bound: bool
    copy_gbs: float | None
    bandwidth_fraction_p50: float | None = None
    largest: LargestShape | None = None


class BaselineFailure(_Strict):
    input: str
    error: str


class BaselineSummary(_Strict):
    """The kernel against one compiled baseline over the shapes it compiled for; ``measured`` False
    with the ``reason`` where it was not timed (the CPU, a failing kernel)."""
    engine: Literal["inductor"]
    compile_mode: str
    measured: bool
    reason: str | None = None
    compared: int | None = None
    compile_failures: list[BaselineFailure] = []
    geomean_speedup: float | None = None
    speedup_p20: float | None = None
    speedup_p50: float | None = None
    speedup_p80: float | None = None
    fast_p: dict[str, float] | None = None


class ProfileFiles(_Strict):
    """Torch profiler traces (Chrome trace JSON) of eager and of the kernel on one shape, and each
    side's GPU activity per call (``launches``: "eager", "kernel")."""
    id: str
    input: str
    files: list[str] = []
    launches: dict[str, list[Launch]] = {}
    wall_s: float | None = None  # what profiling this shape cost
    error: str | None = None


class NcuFigures(_Strict):
    """What Nsight Compute measures (``harness.timing.ncu``), for one launch or one call's launches."""
    time_us: float | None = None
    dram_gbs: float | None = None
    dram_pct: float | None = None
    sm_pct: float | None = None
    occupancy_pct: float | None = None


class NcuKernel(NcuFigures):
    """One kernel launch."""
    name: str
    block: str
    grid: str
    registers: float | None = None


class NcuSide(NcuFigures):
    """Eager's or the kernel's one call on a shape: time summed over its launches, bandwidth as
    bytes over time, percentages weighted by each launch's time."""
    kernels: list[NcuKernel] = []
    error: str | None = None


class NcuShape(_Strict):
    id: str
    input: str
    eager: NcuSide | None = None
    kernel: NcuSide | None = None


class NcuReport(_Strict):
    """``bbagent bench --ncu``: ``measured`` False with the ``reason`` where ncu did not run."""
    measured: bool
    reason: str | None = None
    ncu: str | None = None  # the ncu that ran
    csv: str | None = None  # its raw output, kept in the run directory
    shapes: list[NcuShape] = []
    notes: list[str] = []
    wall_s: float | None = None  # what running ncu cost


class Performance(_Strict):
    """The timing phase: ``measured`` False with the ``reason`` where nothing was timed."""
    measured: bool
    reason: str | None = None
    gpu: str | None = None
    device: DeviceYardsticks | None = None
    device_measured: bool | None = None
    target_ms: float | None = None
    planned: int | None = None
    tests: list[TimedTest] = []
    summary: PerformanceSummary | None = None
    baselines: dict[str, BaselineSummary] | None = None  # besides eager (whose figures are the summary)
    profiles: list[ProfileFiles] | None = None  # bbagent bench --profile
    ncu: NcuReport | None = None  # bbagent bench --ncu

    def counted_tests(self) -> list[TimedTest]:
        """The timed shapes the speedups count: those not dominated by launch overhead (all of
        them where every one is)."""
        return [t for t in self.tests if not t.overhead_dominated] or self.tests

    def furthest_from_roof(self, count: int) -> list[TimedTest]:
        """The ``count`` counted shapes whose kernel time is furthest above the roofline's floor time."""
        known = [(t.floor_ms - t.candidate.median_ms, t) for t in self.counted_tests()
                 if t.floor_ms is not None and t.candidate is not None]
        return [t for _, t in sorted(known, key=lambda pair: pair[0])][:count]


class SuiteInfo(_Strict):
    notes: list[str] = []
    cases: int = 0


class Variant(_Strict):
    """One overload tested with the kernel: served by the kernel itself or by bbagent's adapter."""
    op: str
    convention: Literal["functional", "inplace", "out"]
    served_by: Literal["kernel", "adapter"]
    planned: int
    passed: int
    failed: int
    ok: bool


class Timings(_Strict):
    wall_s: float | None = None
    startup_s: float | None = None
    child_ready_s: float | None = None
    suite_build_s: float | None = None
    tests_s: float | None = None  # the child's whole run, from its start to its last test (the suite included)
    phases: dict[str, float] = {}  # that run by phase: start, suite, seal, import, tests (timing included)
    # the tests phase by part: ahead (compiling ahead; ahead_inputs is its calls' inputs, drawn and
    # cloned), inputs (a test's, drawn and cloned), reference, candidate, checks, memory (cached
    # device memory given back), timing; the rest is the loop's own
    test_parts: dict[str, float] = {}
    # modules first imported after the child was sealed, where an import costs far more (the audit
    # hook, the file view): the candidate's own, or a lazy import of torch or Triton to preload
    imported_sealed: list[str] = []
    # compiling ahead (harness.sandbox.child.compile_ahead): calls made, those that reached a launch, seconds
    # (part of tests_s; its compilations are in compiles and compile_s), why it stopped early if it did,
    # the most compile processes it forked at once and the compilations they made first
    ahead_calls: int = 0
    ahead_launches: int = 0
    ahead_s: float = 0.0
    ahead_stopped: str = ""
    ahead_processes: int = 0
    ahead_warmed: int = 0
    host_memory_peak_gib: float = 0.0  # the most the child's processes held at one of the watchdog's checks (0.1 s apart)
    # a GPU shared by phase (harness.sandbox.parent.gpu_share): the most device memory the child's allocator
    # held; the tests run again after the harness's own work ran out of it, and the pauses before them;
    # seconds waited to start and for the GPU alone; the pauses its child made at checkpoints while
    # another evaluation held the GPU alone, and their seconds; whether other evaluations ran beside
    # this one's tests; and why it was run again alone, where it was (its first run's failure was not
    # believed)
    device_memory_peak_gib: float | None = None
    memory_retries: int = 0
    memory_wait_s: float = 0.0
    gpu_pauses: int = 0
    gpu_paused_s: float = 0.0
    gpu_wait_s: float = 0.0
    gpu_shared: bool = False
    rerun_alone: str | None = None
    compiles: int = 0  # Triton compilations (on-disk cache hits included)
    compile_s: float = 0.0  # outside autotuning
    autotune_runs: int = 0  # @triton.autotune runs that benchmarked configs (a new key each)
    autotune_s: float = 0.0  # benchmarking configs, their compilation included


class ContainmentLimits(_Strict):
    core_dumps: int
    file_size_bytes: int
    processes: int | None


class Containment(_Strict):
    """What the sandbox had in force (``harness.sandbox.child.containment``). ``files``: how the
    file allow list was enforced, ``"mount_namespace"`` (a new root holding only the listed
    paths) or ``"audit_hook"`` (every open and listing checked); None if the child ended
    before the candidate was imported."""
    network_namespace: bool
    mount_namespace: bool = False
    files: Literal["mount_namespace", "audit_hook"] | None = None
    read_only_paths: list[str] = []
    writable_paths: list[str] = []
    hidden_paths: list[str] = []
    capabilities_dropped: bool = False  # none left to the candidate (it can mount or make devices nowhere)
    notes: list[str]
    limits: ContainmentLimits | None = None
    audit_hook: bool = False
    seal_s: float | None = None  # computing the allow list and building the view


class HelionConfigs(_Strict):
    """A Helion kernel's configs in the run (``harness.helion_configs``): the table its tuning found
    (``tuned``: the JSON kept beside the kernel), or how many specializations ran the pinned configs
    and the calls that had none (``unseen``: they ran the untuned config)."""
    tuned: str | None = None
    pinned: int = 0
    unseen: list[str] = []


class Environment(_Strict):
    device: str | None = None
    interpreter: bool | None = None
    gpu: str | None = None
    cuda_visible_devices: str | None = None  # the physical GPU the child was pinned to (a batch's pool)
    torch: str | None = None
    triton: str | None = None
    python: str | None = None
    cuda: str | None = None
    containment: Containment | None = None


class Verdict(_Strict):
    schema_version: int = SCHEMA_VERSION
    op: str  # the problem's key (harness.problem.Problem.key): an overload's name, a program's kernelbench/...
    problem_kind: Literal["operator", "program"] = "operator"
    kernel: KernelFile
    verdict: Literal["pass", "fail"]
    error_kind: ErrorKind | None = None
    message: str = ""
    # Set where the evaluation failed for a reason that is not the kernel's: the sandbox child died or
    # failed before its tests were built (a lost GPU, a driver error). A batch retries such an
    # evaluation elsewhere instead of charging the kernel.
    infrastructure: str | None = None
    seed: int
    summary: Summary
    failure_groups: list[FailureGroup] = []
    tests: list[TestResult] = []
    in_use: list[InUseCheck] = []  # once every test passed: the kernel as users run it
    skipped: list[Skipped] = []
    guard_findings: list[GuardFinding] = []
    performance: Performance | None = None
    helion_configs: HelionConfigs | None = None  # tuned or pinned Helion configs (harness.helion_configs)
    suite: SuiteInfo = SuiteInfo()
    kernel_for: str | None = None
    variants: list[Variant] = []
    timings: Timings = Timings()
    environment: Environment = Environment()
    exit: str | None = None
    stderr_tail: str = ""
    stdout_tail: str = ""
    redactions: int = 0  # secret values replaced by "[redacted]" in this Verdict's texts (harness.redact)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def test_counts(self) -> TestCounts:
        own = self.kernel_for or self.op
        mine = [t for t in self.tests if t.overload in (None, own)]
        overloads = {t.overload or own for t in self.tests} | {v.op for v in self.variants}
        return TestCounts(passed=self.summary.passed, total=self.summary.total, overloads=max(len(overloads), 1),
                          own_op=own, own_passed=sum(1 for t in mine if t.passed), own_total=len(mine),
                          not_run_here=self.summary.skipped, interpreter=bool(self.environment.interpreter))

    def geomean_speedup(self) -> float | None:
        """The geomean speedup over eager of a timed kernel, else None (untimed or failing)."""
        performance = self.performance
        if performance is None or not performance.measured or performance.summary is None:
            return None
        return performance.summary.geomean_speedup

    def geomean_roof_fraction(self) -> float | None:
        """How near the roofline a timed kernel is: the geometric mean over the timed shapes the
        speedup counts (those not dominated by launch overhead, which no kernel brings near it) of
        each shape's roof fraction (its floor time over the kernel's, 1.0 at the roofline); None
        where nothing was timed or no shape has a roofline."""
        performance = self.performance
        if performance is None or not performance.measured:
            return None
        fractions = [t.roof_fraction for t in performance.counted_tests()
                     if t.roof_fraction is not None and t.roof_fraction > 0]
        return math.exp(sum(math.log(f) for f in fractions) / len(fractions)) if fractions else None

    def baseline_speedup(self, engine: str) -> float | None:
        """The geomean speedup over a compiled baseline (``inductor``), else None (not asked for,
        not timed, failing, or no shape it compiled)."""
        performance = self.performance
        found = (performance.baselines or {}).get(engine) if performance is not None else None
        return found.geomean_speedup if found is not None and found.measured else None
