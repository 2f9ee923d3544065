"""Judging, as the agent asks for it: the harness's problem for an operator's name, what an
evaluation needs checked before it starts, the kernel file it tests, the run's request, and the
run's ``Evaluations`` (here, or on a batch's executor).

Every problem found here is the caller's to fix and raised as a ``UsageError`` naming the fix.
"""
from __future__ import annotations

import contextlib
import importlib.util
import re
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from bbagent.agent.errors import UsageError
from bbagent.agent.families import family_of
from bbagent.agent.options import engines_of, positive
from bbagent.agent.review.catalog import kernel_serving, written_for_beside
from bbagent.agent.review.lifecycle import configs_beside
from bbagent.harness.interface import (AdapterError, CHANNELS_LAST_FAMILIES, CONFIGS_FILE, DSLS, ConfigTable, EvaluationRequest, HERE, KernelFileError,
                                       ProblemError, ReferenceCache, SUITES, SetupError, TIMING_CACHE_FILE,
                                       TimingOptions, UnknownOpError, default_device, describe_program, find_ncu,
                                       list_ops, operator_problem, problem_to_test, program_problem, triton_version,
                                       variant_family)

if TYPE_CHECKING:
    from bbagent.harness.interface import Evaluator, Verdict

PROFILED_SHAPES = 2  # bench --profile and --ncu: the largest timed shapes, each for eager and the kernel


@contextlib.contextmanager
def callers_fault():
    """The harness's errors that are the caller's to fix (a name that is no overload, a kernel that
    cannot serve one, a kernel file missing, a setup that cannot run) raised as a UsageError."""
    try:
        yield
    except (UnknownOpError, AdapterError, KernelFileError, SetupError, ProblemError) as exc:
        raise UsageError(str(exc)) from None


def problem_of(name: str, *, exact_overload: bool = False, to_test: bool = False, family: bool = False):
    """The harness's problem for ``name`` (``harness.problem``): ``generate``'s (``exact_overload``)
    or, ``to_test``, a given kernel file's (``family``: every overload of its family; ``written_as``
    names the overload the file is written for). A name that is no overload is a UsageError."""
    with callers_fault():
        if to_test:
            return problem_to_test(name, family=family)
        return operator_problem(name, exact_overload=exact_overload)


def program_of(path) -> tuple:
    """The program problem in the file at ``path`` and what one shape-only run of it found
    (``harness.program_facts``); a file that is no problem, or a program that cannot be set up, is
    a UsageError."""
    with callers_fault():
        problem = program_problem(path)
        return problem, describe_program(problem)


def written_as(problem, written_for: str):
    """``problem`` for a kernel file written for ``written_for`` (``OperatorProblem.written_as``);
    a name that is no overload, or a kernel that cannot serve one, is a UsageError."""
    with callers_fault():
        return problem.written_as(written_for)


def check_op(op: str) -> None:
    """A UsageError unless ``op`` names an aten overload."""
    problem_of(op, exact_overload=True)


def check_served_name(name: str) -> None:
    """A UsageError unless ``name`` names what ``enable(ops=...)`` can choose: an aten overload or
    a program answer's key (``kernelbench/<level>/<problem>``, as a serving plan lists it)."""
    parts = name.split("/")
    if parts[0] == "kernelbench":
        if len(parts) != 3 or not all(parts):
            raise UsageError(f"'{name}' is no program answer's key: expected kernelbench/<level>/<problem>, as "
                             "'bbagent review list' shows it")
        return
    check_op(name)


def check_evaluation(device: str | None, timeout_s: float, allow_no_opinfo: bool, dsl: str = "triton") -> None:
    """What an evaluation needs before it starts: a positive time limit, CUDA where asked for,
    OpInfo (unless the caller accepts tests without it), and the kernel language ``dsl`` usable here."""
    positive("--timeout", timeout_s)
    unusable = DSLS[dsl].unusable() if dsl in DSLS else f"unknown kernel language {dsl!r}"
    if unusable:
        raise UsageError(unusable)
    if device not in (None, "cuda", "cpu"):
        raise UsageError(f"device must be 'cuda' or 'cpu' (got {device!r})")
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise UsageError("--device cuda: this machine has no usable CUDA device (torch "
                             f"{torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); use --device cpu "
                             "to run under the Triton interpreter")
    if device == "cpu" or device is None and default_device() == "cpu":
        broken = why_no_interpreter()
        if broken:
            raise UsageError(broken)
    problem = None if allow_no_opinfo else why_no_opinfo()
    if problem:
        raise UsageError(f"PyTorch's OpInfo test database cannot be imported ({problem}), so every OpInfo test "
                         "would be missing. Install it with: pip install expecttest (or pass --allow-no-opinfo "
                         "to test on traces and edge cases alone)")


def why_no_interpreter(versions: dict[str, str] | None = None) -> str | None:
    """Why Triton's interpreter cannot judge kernels on this stack, or None. Triton 3.6 and earlier
    (3.5.1 and 3.6.0 checked; 3.7.1, 3.8.0 and 3.9.0 work) turn a loop bound into a Python int with
    ``int()`` of a one-element array, which numpy 2.4 and later refuse: every kernel with a ``for``
    over a run-time bound would fail to compile under it, correct or not. ``versions``: the installed
    ones (a test gives its own)."""

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
    return tuple(int(n) for n in re.findall(r"\d+", version)[:2])


def why_no_opinfo() -> str | None:
    """Why the OpInfo database (torch.testing._internal) cannot be imported, or None. Checked
    without importing it (that costs seconds): its module must exist and expecttest, which it
    imports first, must be importable."""
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
    if suite not in SUITES:
        raise UsageError(f"unknown suite '{suite}'; choose one of {', '.join(SUITES)}")
    rows = list_ops(suite)
    for row in rows:
        row["family"] = family_of(row["op"])
    return [row for row in rows if (not pattern or pattern in row["op"]) and (not family or row["family"] == family)]


def family_of_overload(op: str) -> dict:
    """The overloads computing what ``op`` computes (``harness.variants.variant_family``), by name."""
    return variant_family(problem_of(op, exact_overload=True).computation)


def refuse_operator_flags(given: dict[str, object]) -> None:
    """A UsageError naming the flags of ``given`` (flag -> value) that were set: they apply to an
    operator's kernel, and a program's answer was asked for."""
    named = [flag for flag, value in given.items() if value]
    if named:
        raise UsageError(f"{', '.join(named)} {'applies' if len(named) == 1 else 'apply'} to an operator's kernel "
                         "(--op), not to a program's answer (--problem)")


def check_channels_last(op: str, wanted: bool, quiet: bool = False) -> bool:
    """Whether ``op``'s trace inputs also run channels-last: asked for, and ``op`` in a family whose
    ops models feed such tensors (``harness.layouts``). Asked for another op: a UsageError, or
    False when ``quiet`` (a batch applies it where it applies)."""
    if not wanted:
        return False
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
    if kernel is not None:
        kernel = Path(kernel)
        if not kernel.is_file():
            raise UsageError(f"--kernel {kernel}: no such file" if not kernel.exists()
                             else f"--kernel {kernel} is not a file")
        return kernel, kernel_for or written_for_beside(kernel) or op
    entry = kernel_serving(root, op)
    if entry is None:
        raise UsageError(f"no accepted kernel serves {op} under {root / 'generated_kernels'}: run "
                         f"'bbagent generate --op {op}' first or pass --kernel FILE")
    return entry.kernel, kernel_for or entry.meta.written_for


def evaluation_request(problem, root: Path, *, device: str | None, seed: int | None, timeout_s: float,
                       timing=None, extra_traces: dict | None = None, channels_last: bool = False,
                       allow_library: str = "gemm", facts=None, dsl: str = "triton"):
    """The harness's request for ``problem`` with these settings; ``root`` (runs, kernels) is never
    shown to the candidate, even where it lies inside a directory the sandbox shows. A program's
    ``facts`` (``ProgramFacts``) say how much device memory a shared GPU must admit it with; ``dsl``:
    the kernel language the answer was asked in."""
    return EvaluationRequest.of(problem, device=device, seed=seed, timeout_s=timeout_s, timing=timing,
                                hidden=[root], extra_traces=extra_traces or {}, channels_last=channels_last,
                                allow_library=allow_library, dsl=dsl,
                                expected_bytes=facts.device_need() if facts is not None else None)


def check_tuning(budget_s: float, device: str | None, program: bool = False) -> None:
    """What ``--autotune-budget`` needs before a run starts: a GPU (the interpreter cannot time a
    config) and an operator's kernel (a program's answer is not tuned)."""
    if not budget_s:
        return
    if (device or default_device()) != "cuda":
        raise UsageError("--autotune-budget tunes a Helion kernel on a GPU, and this run's kernels run on the CPU "
                         "(Triton's interpreter cannot time a config): drop the option, or run on a GPU")
    if program:
        raise UsageError("--autotune-budget tunes an operator's Helion kernel; a program's answer is not tuned: "
                         "drop the option")


def stored_request(version, root: Path, *, device: str | None, timeout_s: float, timing=None):
    """The request that judges a stored kernel (``agent.review.catalog.KernelVersion``) again as
    its kind says (``StoredKind.judged_as``: a UsageError where its problem is not at hand)."""
    with callers_fault():
        problem, facts = version.kind.judged_as(version)
    return evaluation_request(problem, root, device=device, seed=None, timeout_s=timeout_s, timing=timing,
                              allow_library=version.meta.allow_library or "gemm", facts=facts, dsl=version.meta.dsl)


def as_served(request: EvaluationRequest, kernel: Path) -> EvaluationRequest:
    """``request`` for the kernel file ``kernel`` as it is served: with the Helion configs kept
    beside it (``CONFIGS_FILE``) pinned, as every import of it pins them; unchanged where there
    are none, or where the request pins its own."""
    if request.helion_configs is not None:
        return request
    try:
        text = configs_beside(kernel)
        if text is None:
            return request
        ConfigTable.from_json(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{Path(kernel).with_name(CONFIGS_FILE)}, the Helion configs beside the kernel, cannot be "
                         f"read: {exc}") from None
    return request.pinned(text)


def this_machine() -> Evaluator:
    """This machine's evaluator (``harness.interface.HERE``)."""
    return HERE


@dataclass
class Evaluations:
    """The evaluations of one run: its request, and where they run (``evaluator``: this machine,
    or a batch's executor). ``prepare()`` builds the suite in a thread of its own while the model
    writes the first answer; the first evaluation waits for it, then loads it."""
    request: EvaluationRequest
    evaluator: Evaluator = field(default_factory=lambda: this_machine())
    preparing: threading.Thread | None = None
    prepared: dict | None = None  # outcome (cached, built, why not), seconds, started_at

    def prepare(self) -> None:
        """Start building the suite."""
        self.preparing = threading.Thread(target=self._prepare, name="bbagent-suite-ahead", daemon=True)
        self.preparing.start()

    def _prepare(self) -> None:
        started = time.time()
        try:
            outcome = self.evaluator.prepare(self.request)
        except Exception as exc:  # noqa: BLE001 - a saving only: the first evaluation builds the suite then
            outcome = f"not built ({type(exc).__name__}: {exc})"
        self.prepared = {"outcome": outcome, "seconds": round(time.time() - started, 3), "started_at": round(started, 3)}

    def evaluate(self, kernel: Path, profile: bool = True) -> Verdict:
        """The kernel's Verdict; ``profile=False`` leaves out the timing's profiles (no later round
        would read them). Judged as served: the Helion configs kept beside the file are pinned
        (``as_served``). The caller's inputs or setup at fault: a UsageError."""
        return self.evaluate_as(as_served(self.request if profile else self.request.without_profiles(), kernel),
                                kernel)

    def evaluate_as(self, request: EvaluationRequest, kernel: Path) -> Verdict:
        """The kernel's Verdict under ``request``, one the run's request was changed into (a
        Helion kernel's tuning, its configs pinned)."""
        if self.preparing is not None:
            self.preparing.join()
        with callers_fault():
            return self.evaluator.evaluate(request, kernel)


def timing_options(root: Path, *, max_shapes: int, target_ms: float, no_cache: bool, keep_raw: bool = False,
                   engines: tuple[str, ...] = ("eager",), inductor_mode: str = "default", profile: int = 0,
                   ncu: int = 0, profile_feedback: bool = False, feedback_by_ncu: bool = True):
    """The timing phase's options (``harness.evaluate.TimingOptions``) with the timing cache under
    ``root/runs``; ``engines``: the baselines to compare with (``agent.options.engines_of``).
    ``profile_feedback`` (generate's optimisation rounds): every timed kernel is also profiled,
    with eager, on the ``FEEDBACK_PROFILED_SHAPES`` shapes furthest from their roofline: by Nsight
    Compute where ncu is found and ``feedback_by_ncu`` (a program's are not: its one shape, and
    torch.compile's code beside it, go to the torch profiler), else by the torch profiler (launches
    and times only)."""
    positive("--max-shapes", max_shapes, minimum=1)
    positive("--target-ms", target_ms)
    return TimingOptions(target_ms=target_ms, max_cases=max_shapes, reuse=not no_cache,
                         cache=ReferenceCache(root / "runs" / TIMING_CACHE_FILE), keep_raw=keep_raw,
                         baselines=engines_of(",".join(engines), inductor_mode), inductor_mode=inductor_mode,
                         **{"profile": profile, "ncu": ncu, **(_feedback_profiles(feedback_by_ncu) if profile_feedback else {})})


FEEDBACK_PROFILED_SHAPES = 2


def _feedback_profiles(by_ncu: bool) -> dict:
    how = "ncu" if by_ncu and find_ncu() else "profile"
    return {how: FEEDBACK_PROFILED_SHAPES, "pick": "furthest"}
