"""The agent's way into the harness: what an evaluation needs checked before it starts, which
kernel and overloads it tests, and an evaluator that runs it here or on a batch's executor.

Every problem found here is the caller's to fix and raised as a ``UsageError`` naming the fix.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bbagent.agent.errors import UsageError
from bbagent.agent.options import engines_of, positive

PROFILED_SHAPES = 2  # bench --profile and --ncu: the largest timed shapes, each for eager and the kernel


def check_op(op: str) -> None:
    from bbagent.harness.ops import UnknownOpError, resolve_op
    try:
        resolve_op(op)
    except UnknownOpError as exc:
        raise UsageError(str(exc)) from None


def default_device() -> str:
    from bbagent.harness.evaluate import default_device as harness_default
    return harness_default()


def check_evaluation(device: str | None, timeout_s: float, allow_no_opinfo: bool) -> None:
    """What an evaluation needs before it starts: a positive time limit, CUDA where asked for,
    and OpInfo (unless the caller accepts tests without it)."""
    positive("--timeout", timeout_s)
    if device not in (None, "cuda", "cpu"):
        raise UsageError(f"device must be 'cuda' or 'cpu' (got {device!r})")
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise UsageError("--device cuda: this machine has no usable CUDA device (torch "
                             f"{torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); use --device cpu "
                             "to run under the Triton interpreter")
    if device == "cpu" or device is None and default_device() == "cpu":
        broken = interpreter_problem()
        if broken:
            raise UsageError(broken)
    problem = None if allow_no_opinfo else opinfo_problem()
    if problem:
        raise UsageError(f"PyTorch's OpInfo test database cannot be imported ({problem}), so every OpInfo test "
                         "would be missing. Install it with: pip install expecttest (or pass --allow-no-opinfo "
                         "to test on traces and edge cases alone)")


def interpreter_problem(versions: dict[str, str] | None = None) -> str | None:
    """Why Triton's interpreter cannot judge kernels on this stack, or None. Triton 3.6 and earlier
    (3.5.1 and 3.6.0 checked; 3.7.1, 3.8.0 and 3.9.0 work) turn a loop bound into a Python int with
    ``int()`` of a one-element array, which numpy 2.4 and later refuse: every kernel with a ``for``
    over a run-time bound would fail to compile under it, correct or not. ``versions``: the installed
    ones (a test gives its own)."""
    from importlib import metadata

    from bbagent.harness.fingerprint import triton_version
    if versions is None:
        try:  # triton as the harness reads it: a pytorch-triton distribution counts
            versions = {"triton": triton_version(), "numpy": metadata.version("numpy")}
        except (metadata.PackageNotFoundError, ImportError):
            return None
    if _release(versions["triton"]) < (3, 7) and _release(versions["numpy"]) >= (2, 4):
        return (f"Triton's interpreter (triton {versions['triton']}) cannot run a `for` loop over a run-time bound "
                f"with numpy {versions['numpy']} (\"TypeError: only 0-dimensional arrays can be converted to Python "
                "scalars\"), so correct kernels would fail under it. Install numpy below 2.4 (pip install "
                "'numpy<2.4') or triton 3.7 or later, or evaluate on a GPU (--device cuda)")
    return None


def _release(version: str) -> tuple[int, ...]:
    """(3, 6) of "3.6.0", (2, 4) of "2.4.6rc1": the first two numbers of a version."""
    import re
    return tuple(int(n) for n in re.findall(r"\d+", version)[:2])


def opinfo_problem() -> str | None:
    """Why the OpInfo database (torch.testing._internal) cannot be imported, or None. Checked
    without importing it (that costs seconds): its module must exist and expecttest, which it
    imports first, must be importable."""
    import importlib.util
    try:
        if importlib.util.find_spec("torch.testing._internal.common_methods_invocations") is None:
            return "this torch has no torch.testing._internal"
        import expecttest  # noqa: F401
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def listed_ops(suite: str = "all", family: str | None = None, pattern: str | None = None) -> list[dict]:
    """The overloads bbagent can test (``bbagent ops --json`` rows) of ``suite``, by prompt family
    and a substring of the name."""
    from bbagent.agent.families import family_of
    from bbagent.harness.coverage import SUITES, list_ops
    if suite not in SUITES:
        raise UsageError(f"unknown suite '{suite}'; choose one of {', '.join(SUITES)}")
    rows = list_ops(suite)
    for row in rows:
        row["family"] = family_of(row["op"])
    return [row for row in rows if (not pattern or pattern in row["op"]) and (not family or row["family"] == family)]


def family_of_overload(op: str) -> dict:
    """The overloads computing what ``op`` computes (``harness.variants.variant_family``)."""
    from bbagent.harness.ops import resolve_op
    from bbagent.harness.variants import variant_family
    return variant_family(resolve_op(op))


@dataclass(frozen=True)
class ResolvedOperator:
    """An operator as ``generate`` and a batch take it, resolved once from the name given
    (``resolve_operator``) and handed down as it is: the overload the model is asked for
    (``computation``), every overload its kernel is tested and served as (``serves``, computation
    first) and the prompt family it belongs to."""
    requested: str
    computation: str
    serves: tuple[str, ...]
    family: str

    @property
    def also_serves(self) -> list[str]:
        """The in-place and out= overloads served by the same kernel."""
        return list(self.serves[1:])


def resolve_operator(op: str, exact_overload: bool = False) -> ResolvedOperator:
    """``op`` resolved (a UsageError where no such overload exists): asked for as the family's
    functional overload and served as the whole family, unless ``exact_overload`` (or the overload
    has no functional sibling)."""
    from bbagent.agent.families import family_of
    check_op(op)
    overloads = family_of_overload(op)
    if exact_overload or overloads["functional"] is None:
        return ResolvedOperator(op, op, (op,), family_of(op))
    return ResolvedOperator(op, overloads["functional"], tuple(overloads["serves"]), family_of(overloads["functional"]))


def check_channels_last(op: str, wanted: bool, quiet: bool = False) -> bool:
    """Whether ``op``'s trace inputs also run channels-last: asked for, and ``op`` in a family whose
    ops models feed such tensors (``harness.layouts``). Asked for another op: a UsageError, or
    False when ``quiet`` (a batch applies it where it applies)."""
    if not wanted:
        return False
    from bbagent.agent.families import family_of
    from bbagent.harness.layouts import CHANNELS_LAST_FAMILIES
    family = family_of(op)
    if family in CHANNELS_LAST_FAMILIES:
        return True
    if quiet:
        return False
    raise UsageError(f"--channels-last applies to the {', '.join(sorted(CHANNELS_LAST_FAMILIES))} families; "
                     f"{op} is in '{family}'")


def kernel_to_evaluate(op: str, kernel: str | Path | None, kernel_for: str | None, root: Path) -> tuple[Path, str]:
    """The kernel file and the overload it is written for: ``kernel`` (written for ``kernel_for``,
    for the written_for of the meta.json beside it, else for ``op``), or the accepted kernel
    serving ``op``."""
    from bbagent.agent.review.catalog import kernel_serving, written_for_beside
    if kernel is not None:
        kernel = Path(kernel)
        if not kernel.is_file():
            raise UsageError(f"--kernel {kernel}: no such file" if not kernel.exists()
                             else f"--kernel {kernel} is not a file")
        written_for = kernel_for or written_for_beside(kernel) or op
    else:
        entry = kernel_serving(root, op)
        if entry is None:
            raise UsageError(f"no accepted kernel serves {op} under {root / 'generated_kernels'}: run "
                             f"'bbagent generate --op {op}' first or pass --kernel FILE")
        kernel, written_for = entry.kernel, kernel_for or entry.meta.written_for
    check_op(written_for)
    return kernel, written_for


def evaluator(root: Path, *, device: str | None, seed: int | None, timeout_s: float, timing=None,
              kernel_for: str | None = None, overloads: list[str] | None = None, executor=None,
              extra_traces: dict | None = None, channels_last: bool = False) -> "Evaluator":
    """``(op, kernel_file, profile=True) -> Verdict`` with these settings; ``root`` (runs, kernels)
    never shown to the candidate, even where it lies inside a directory the sandbox shows.
    ``executor`` (a batch's ``agent.batch.executor.Executor``) decides where it runs; without one,
    here. ``profile=False`` leaves out the timing's profiles (no later round would read them)."""
    return Evaluator(root=root, device=device, seed=seed, timeout_s=timeout_s, timing=timing, kernel_for=kernel_for,
                     overloads=overloads, executor=executor, extra_traces=extra_traces, channels_last=channels_last)


@dataclass
class Evaluator:
    """An evaluator (``evaluator``); ``prepare(op)`` builds the operator's suite in a thread of its own
    while the model writes the first answer, and the first evaluation waits for it, then loads it."""
    root: Path
    device: str | None
    seed: int | None
    timeout_s: float
    timing: object = None
    kernel_for: str | None = None
    overloads: list[str] | None = None
    executor: object = None
    extra_traces: dict | None = None
    channels_last: bool = False
    preparing: threading.Thread | None = None
    prepared: dict | None = None  # outcome (cached, built, why not), seconds, started_at

    def prepare(self, op: str) -> None:
        """Start building the suite of ``op`` (nothing where the executor cannot: a Ray cluster)."""
        if self.executor is not None and not hasattr(self.executor, "prepare_suite"):
            return
        self.preparing = threading.Thread(target=self._prepare, args=(op,), name="bbagent-suite-ahead", daemon=True)
        self.preparing.start()

    def _prepare(self, op: str) -> None:
        from bbagent.harness.evaluate import prepare_suite
        started = time.time()
        options = dict(overloads=self.overloads, extra_traces=self.extra_traces, channels_last=self.channels_last,
                       timeout_s=self.timeout_s, hidden=[self.root])
        try:
            outcome = (self.executor.prepare_suite(op, **options) if self.executor is not None
                       else prepare_suite(op, device=self.device, **options))
        except Exception as exc:  # noqa: BLE001 - a saving only: the first evaluation builds the suite then
            outcome = f"not built ({type(exc).__name__}: {exc})"
        self.prepared = {"outcome": outcome, "seconds": round(time.time() - started, 3), "started_at": round(started, 3)}

    def __call__(self, op: str, kernel: Path, profile: bool = True):
        from bbagent.harness.adapters import AdapterError
        from bbagent.harness.evaluate import KernelFileError, SetupError, evaluate as run_evaluation
        if self.preparing is not None:
            self.preparing.join()
        timing = self.timing
        if not profile and timing is not None:
            timing = dataclasses.replace(timing, profile=0, ncu=0)
        options = dict(seed=self.seed, timeout_s=self.timeout_s, hidden=[self.root], timing=timing,
                       kernel_for=self.kernel_for, overloads=self.overloads, extra_traces=self.extra_traces,
                       channels_last=self.channels_last)
        try:
            if self.executor is not None:
                return self.executor.evaluate(op, kernel, **options)
            return run_evaluation(op, kernel, device=self.device, **options)
        except (KernelFileError, AdapterError, SetupError) as exc:  # the caller's inputs or setup
            raise UsageError(str(exc)) from None


def timing_options(root: Path, *, max_shapes: int, target_ms: float, no_cache: bool, keep_raw: bool = False,
                   engines: tuple[str, ...] = ("eager",), inductor_mode: str = "default", profile: int = 0,
                   ncu: int = 0, profile_feedback: bool = False):
    """The timing phase's options (``harness.evaluate.TimingOptions``) with the timing cache under
    ``root/runs``; ``engines``: the baselines to compare with (``agent.options.engines_of``).
    ``profile_feedback`` (generate's optimisation rounds): every timed kernel is also profiled,
    with eager, on the ``FEEDBACK_PROFILED_SHAPES`` shapes furthest from their roofline: by Nsight
    Compute where ncu is found, else by the torch profiler (launches and times only)."""
    from bbagent.harness.evaluate import TimingOptions
    from bbagent.harness.timing.reference_cache import FILE_NAME, ReferenceCache
    positive("--max-shapes", max_shapes, minimum=1)
    positive("--target-ms", target_ms)
    return TimingOptions(target_ms=target_ms, max_cases=max_shapes, reuse=not no_cache,
                         cache=ReferenceCache(root / "runs" / FILE_NAME), keep_raw=keep_raw,
                         baselines=engines_of(",".join(engines), inductor_mode), inductor_mode=inductor_mode,
                         **{"profile": profile, "ncu": ncu, **(_feedback_profiles() if profile_feedback else {})})


FEEDBACK_PROFILED_SHAPES = 2


def _feedback_profiles() -> dict:
    from bbagent.harness.timing.ncu import find_ncu
    how = "ncu" if find_ncu() else "profile"
    return {how: FEEDBACK_PROFILED_SHAPES, "pick": "furthest"}
