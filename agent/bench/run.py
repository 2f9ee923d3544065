"""``bbagent bench``: test a kernel, time it against eager (and the baselines asked for) on the
operator's trace shapes, and keep the Verdict and one benchmark record per (input, engine) in a run
directory of its own (``runs/bench-<id>/``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bbagent.agent.bench.records import BenchRecord, write_bench
from bbagent.agent.errors import ReviewError, UsageError
from bbagent.agent.judging import (Evaluations, PROFILED_SHAPES, check_channels_last, check_evaluation,
                                   evaluation_request, kernel_to_evaluate, problem_of, program_of, timing_options,
                                   written_as)
from bbagent.agent.options import engines_of
from bbagent.agent.review.catalog import find
from bbagent.agent.review.meta import OverloadSpeed, read_meta, write_meta
from bbagent.agent.review.record import now
from bbagent.agent.storage import RunDir, new_run_id
from bbagent.harness.interface import TraceFormatError, Verdict, parse_call_line


@dataclass
class BenchRequest:
    """What to time and how (``bbagent bench``'s options)."""
    kernel: str | Path | None = None  # default: the accepted kernel serving the operator
    kernel_for: str | None = None
    device: str | None = None
    seed: int | None = None
    timeout_s: float = 300.0
    max_shapes: int = 64
    target_ms: float = 100.0
    no_cache: bool = False
    allow_no_opinfo: bool = False
    baseline: str = "eager"
    inductor_mode: str = "default"
    channels_last: bool = False
    profile: bool = False
    ncu: bool = False
    extra_traces: dict | None = None  # more inputs per operator name, timed first ({"line", "timed"}: a dataset's form)
    allow_library: str = "gemm"  # a program's answer: what it may leave to torch
    dsl: str = "triton"  # the kernel language it must be written in (harness.dsl)


@dataclass
class BenchResult:
    verdict: Verdict
    run_dir: Path
    bench_file: Path
    records: list[BenchRecord]


def run_bench(op: str, request: BenchRequest, root: Path, on_start: Callable[[Path], None] | None = None) -> BenchResult:
    """Bench ``op`` under ``root`` (writable); ``on_start`` hears the run directory before the
    evaluation starts. An accepted kernel timed as served records its speed in its meta.json."""
    problem = problem_of(op, to_test=True)
    check_evaluation(request.device, request.timeout_s, request.allow_no_opinfo, request.dsl)
    check_extra_traces(request.extra_traces)
    timing = timing_options(root, max_shapes=request.max_shapes, target_ms=request.target_ms,
                            no_cache=request.no_cache, keep_raw=True,
                            engines=engines_of(request.baseline, request.inductor_mode),
                            inductor_mode=request.inductor_mode, profile=PROFILED_SHAPES if request.profile else 0,
                            ncu=PROFILED_SHAPES if request.ncu else 0)
    kernel, written_for = kernel_to_evaluate(op, request.kernel, request.kernel_for, root)
    run = RunDir(root, "bench-" + new_run_id(op))
    timing.profile_dir = run.path
    if on_start is not None:
        on_start(run.path)
    evaluations = Evaluations(evaluation_request(
        written_as(problem, written_for), root, device=request.device, seed=request.seed, timeout_s=request.timeout_s,
        timing=timing, channels_last=check_channels_last(op, request.channels_last), extra_traces=request.extra_traces,
        dsl=request.dsl))
    verdict = evaluations.evaluate(kernel)
    run.write("verdict.json", verdict.model_dump_json(indent=2) + "\n")
    bench_file, records = write_bench(run.path, verdict)
    if request.kernel is None and verdict.passed and verdict.geomean_speedup() is not None:
        record_overload_speed(kernel.parent, op, verdict, run.path.name)
    return BenchResult(verdict, run.path, bench_file, records)


def run_program_bench(problem_file: str | Path, request: BenchRequest, root: Path,
                      on_start: Callable[[Path], None] | None = None) -> BenchResult:
    """Bench an answer to the program in ``problem_file`` (``request.kernel``, default the accepted
    one): judged as ``eval --problem`` judges it, then timed against eager and, unless the baseline
    is eager alone, torch.compile in ``request.inductor_mode``, on the problem's own inputs; with
    ``request.profile``, the torch profiler's traces of ``Model`` and ``ModelNew`` kept in the run."""
    problem, facts = program_of(problem_file)
    check_evaluation(request.device, request.timeout_s, True, request.dsl)
    answer = Path(request.kernel) if request.kernel is not None else _accepted_answer(root, problem.key)
    if not answer.is_file():
        raise UsageError(f"--kernel {answer}: no such file")
    timing = timing_options(root, max_shapes=1, target_ms=request.target_ms, no_cache=request.no_cache, keep_raw=True,
                            engines=engines_of(request.baseline, request.inductor_mode),
                            inductor_mode=request.inductor_mode, profile=1 if request.profile else 0)
    run = RunDir(root, "bench-" + new_run_id(problem.key))
    timing.profile_dir = run.path
    if on_start is not None:
        on_start(run.path)
    evaluations = Evaluations(evaluation_request(problem, root, device=request.device, seed=request.seed,
                                                 timeout_s=request.timeout_s, timing=timing,
                                                 allow_library=request.allow_library, facts=facts,
                                                 dsl=request.dsl))
    verdict = evaluations.evaluate(answer)
    run.write("verdict.json", verdict.model_dump_json(indent=2) + "\n")
    bench_file, records = write_bench(run.path, verdict, workload=problem.key)
    return BenchResult(verdict, run.path, bench_file, records)


def _accepted_answer(root: Path, key: str) -> Path:
    try:
        return find(root, key).current.kernel
    except ReviewError as exc:
        raise UsageError(f"{exc}; pass --kernel ANSWER.py or run bbagent generate --problem FILE first") from None


def check_extra_traces(extra: dict | None) -> None:
    """A UsageError naming the first input of ``extra`` that is not a trace line (the suite would
    leave it out without a word)."""
    for name, entries in (extra or {}).items():
        for entry in entries:
            try:
                parse_call_line(name, entry["line"])
            except (TraceFormatError, KeyError, TypeError) as exc:
                raise UsageError(f"extra_traces[{name!r}]: {entry!r} is not an input of the traces' form "
                                 f"({{'line': \"cnt: 1, ((T([2, 3], f16),), {{}})\", 'timed': True}}): {exc}") from None


def record_overload_speed(folder: Path, op: str, verdict: Verdict, bench_run: str) -> None:
    """An accepted kernel timed as ``op``: its speed as served goes into its meta.json
    (``overload_speedups``), which ``enable()`` and the review flags read."""
    meta = read_meta(folder)
    speed = OverloadSpeed(geomean_speedup=verdict.geomean_speedup(), gpu=verdict.environment.gpu, at=now(),
                          bench_run=bench_run)
    write_meta(folder, meta.model_copy(update={"overload_speedups": {**meta.overload_speedups, op: speed}}))
