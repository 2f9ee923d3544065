"""bbagent's Python API, importable as ``bbagent`` (this folder is installed under that name).

    import bbagent
    verdict = bbagent.evaluate("aten.relu.default", "my_relu.py", device="cpu")
    print(verdict.verdict, verdict.summary.passed, verdict.summary.total)
    outcome = bbagent.generate("aten.relu.default", provider="replay", root="work")
    print(outcome.status, outcome.accepted_dir)

Every path may be a str or a Path. A usage error (unknown operator, missing file, unusable root,
no CUDA, OpInfo missing) raises ``UsageError``, a ValueError whose message names the fix; a
provider that fails for good raises ``ProviderError``. ``root`` is the folder holding ``runs/``
and ``generated_kernels/``: by default ``$BBAGENT_ROOT``, else the current directory. The command
line (``agent.cli``) is a thin layer over these functions.
"""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

__all__ = ["UsageError", "ProviderError", "Verdict", "BenchResult", "Outcome", "version", "__version__",
           "resolve_root", "evaluate", "bench", "prompt", "generate", "ops", "kernels", "load", "enable", "disable", "check_model", "report",
           "verdict_schema", "review_list", "review_show", "review_decide", "review_diff", "review_verify"]


class UsageError(ValueError):
    """A usage error: the message says what to change."""


def version() -> str:
    from importlib import metadata
    try:
        return metadata.version("bbagent")
    except metadata.PackageNotFoundError:
        return "0+unknown (not installed)"


__version__ = version()


def __getattr__(name: str):
    """The types, imported on first use (they pull in pydantic, tenacity and torch)."""
    if name == "Verdict":
        from harness.verdict import Verdict
        return Verdict
    if name == "ProviderError":
        from agent.providers.base import ProviderError
        return ProviderError
    if name == "Outcome":
        from agent.loop import Outcome
        return Outcome
    raise AttributeError(f"module 'bbagent' has no attribute '{name}'")


# --- checks --------------------------------------------------------------------------------------

def resolve_root(root: str | Path | None = None, *, write: bool = False) -> Path:
    """The folder for runs/ and generated_kernels/: ``root``, else $BBAGENT_ROOT, else the current
    directory. With ``write`` it is created (UsageError where it cannot be, or is not writable)."""
    given = root if root is not None else (os.environ.get("BBAGENT_ROOT") or ".")
    where = Path(given).expanduser().resolve()
    source = "--root" if root is not None else ("BBAGENT_ROOT" if os.environ.get("BBAGENT_ROOT") else
                                                "the current directory")
    if where.exists() and not where.is_dir():
        raise UsageError(f"{source} {where} is a file, not a folder: pass --root DIR")
    if write:
        try:
            (where / "runs").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot use {source} {where} to keep runs/ and generated_kernels/ "
                             f"({exc.strerror or exc}): pass --root DIR with a folder you can write") from None
        if not os.access(where / "runs", os.W_OK):
            raise UsageError(f"{source} {where} is not writable: pass --root DIR with a folder you can write")
    return where


def check_op(op: str) -> None:
    from harness.ops import UnknownOpError, resolve_op
    try:
        resolve_op(op)
    except UnknownOpError as exc:
        raise UsageError(str(exc)) from None


def positive(name: str, value, minimum=None) -> None:
    if value is None:
        return
    if (minimum is None and value <= 0) or (minimum is not None and value < minimum):
        rule = "positive" if minimum is None else f"at least {minimum}"
        raise UsageError(f"{name} must be {rule} (got {value})")


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
    problem = None if allow_no_opinfo else opinfo_problem()
    if problem:
        raise UsageError(f"PyTorch's OpInfo test database cannot be imported ({problem}), so every OpInfo test "
                         "would be missing. Install it with: pip install expecttest (or pass --allow-no-opinfo "
                         "to test on traces and edge cases alone)")


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


def family_of_overload(op: str) -> dict:
    """The overloads computing what ``op`` computes (``harness.variants.variant_family``)."""
    from harness.ops import resolve_op
    from harness.variants import variant_family
    return variant_family(resolve_op(op))


def kernel_to_evaluate(op: str, kernel: str | Path | None, kernel_for: str | None, root: Path) -> tuple[Path, str]:
    """The kernel file and the overload it is written for: ``kernel`` (written for ``kernel_for``,
    for the written_for of the meta.json beside it, else for ``op``), or the accepted kernel
    serving ``op``."""
    from agent.served import kernel_serving, written_for_beside
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
        kernel, written_for = Path(entry["kernel"]), kernel_for or entry["written_for"]
    check_op(written_for)
    return kernel, written_for


def evaluator(root: Path, *, device: str | None, seed: int | None, timeout_s: float, timing=None,
              kernel_for: str | None = None, overloads: list[str] | None = None, executor=None,
              extra_traces: dict | None = None, channels_last: bool = False) -> Callable:
    """``(op, kernel_file) -> Verdict`` with these settings; ``root`` (runs, kernels) never shown
    to the candidate, even where it lies inside a directory the sandbox shows. ``executor`` (a
    batch's ``agent.batch.executor.Executor``) decides where it runs; without one, here."""
    from harness.adapters import AdapterError
    from harness.evaluate import KernelFileError, SetupError, evaluate as run_evaluation

    def run(op: str, kernel: Path):
        options = dict(seed=seed, timeout_s=timeout_s, hidden=[root], timing=timing, kernel_for=kernel_for,
                       overloads=overloads, extra_traces=extra_traces, channels_last=channels_last)
        try:
            if executor is not None:
                return executor.evaluate(op, kernel, **options)
            return run_evaluation(op, kernel, device=device, **options)
        except (KernelFileError, AdapterError, SetupError) as exc:  # the caller's inputs or setup
            raise UsageError(str(exc)) from None
    return run


def timing_options(root: Path, *, max_shapes: int, target_ms: float, no_cache: bool, keep_raw: bool = False,
                   baseline: str = "eager", inductor_mode: str = "default", profile: int = 0, ncu: int = 0):
    """``baseline``: the engines to compare with, comma-separated (``harness.timing.baselines``)."""
    from harness.evaluate import TimingOptions
    from harness.timing.reference_cache import FILE_NAME, ReferenceCache
    positive("--max-shapes", max_shapes, minimum=1)
    positive("--target-ms", target_ms)
    engines = check_baseline(baseline, inductor_mode)
    return TimingOptions(target_ms=target_ms, max_cases=max_shapes, reuse=not no_cache,
                         cache=ReferenceCache(root / "runs" / FILE_NAME), keep_raw=keep_raw,
                         baselines=engines, inductor_mode=inductor_mode, profile=profile, ncu=ncu)


def check_baseline(baseline: str, inductor_mode: str) -> tuple[str, ...]:
    """The engines named by ``--baseline``; a UsageError for an unknown one or mode."""
    from harness.timing.baselines import INDUCTOR_MODES, parse_engines
    try:
        engines = parse_engines(baseline)
    except ValueError as exc:
        raise UsageError(f"--baseline: {exc}") from None
    if inductor_mode not in INDUCTOR_MODES:
        raise UsageError(f"--inductor-mode: {inductor_mode!r} is not one of {', '.join(INDUCTOR_MODES)}")
    return engines


# --- evaluate, bench -----------------------------------------------------------------------------

def evaluate(op: str, kernel: str | Path | None = None, *, kernel_for: str | None = None, family: bool = False,
             root: str | Path | None = None, device: str | None = None, seed: int | None = None,
             timeout_s: float = 300.0, allow_no_opinfo: bool = False, channels_last: bool = False):
    """Test ``kernel`` (default: the accepted kernel serving ``op`` under ``root``) on ``op``'s tests,
    in a sandboxed child process; ``family`` tests every overload of its family; ``channels_last``
    runs the 4-d and 5-d trace inputs in that layout too. Returns the Verdict."""
    check_op(op)
    check_evaluation(device, timeout_s, allow_no_opinfo)
    channels_last = check_channels_last(op, channels_last)
    where = resolve_root(root)
    kernel, written_for = kernel_to_evaluate(op, kernel, kernel_for, where)
    overloads = family_of_overload(op)["serves"] if family else [op]
    first = written_for if written_for in overloads else op  # the kernel's own overload is tested first
    return evaluator(where, device=device, seed=seed, timeout_s=timeout_s, kernel_for=written_for,
                     overloads=overloads, channels_last=channels_last)(first, kernel)


@dataclass
class BenchResult:
    verdict: object  # harness.verdict.Verdict
    run_dir: Path
    bench_file: Path
    records: list


def bench(op: str, kernel: str | Path | None = None, *, kernel_for: str | None = None,
          root: str | Path | None = None, device: str | None = None, seed: int | None = None,
          timeout_s: float = 300.0, max_shapes: int = 64, target_ms: float = 100.0, no_cache: bool = False,
          allow_no_opinfo: bool = False, on_start: Callable[[Path], None] | None = None,
          baseline: str = "eager", inductor_mode: str = "default", channels_last: bool = False,
          profile: bool = False, ncu: bool = False) -> BenchResult:
    """Test the kernel, time it and eager aten on ``op``'s trace shapes (GPU), and write one
    benchmark record per (input, engine) to ``root/runs/bench-<id>/bench.jsonl``. ``on_start``
    hears the run directory before the evaluation starts. ``baseline`` "eager,inductor" also times
    the op compiled by torch.compile (``inductor_mode`` default or max-autotune); ``channels_last``
    tests and times the 4-d and 5-d trace inputs in that layout too; ``profile`` writes torch
    profiler traces of eager and the kernel on the largest shapes into the run's ``profiles/``;
    ``ncu`` collects Nsight Compute metrics of both there (``harness.timing.ncu``)."""
    from agent.bench import write_bench
    from agent.storage import RunDir, new_run_id
    check_op(op)
    check_evaluation(device, timeout_s, allow_no_opinfo)
    where = resolve_root(root, write=True)
    timing = timing_options(where, max_shapes=max_shapes, target_ms=target_ms, no_cache=no_cache, keep_raw=True,
                            baseline=baseline, inductor_mode=inductor_mode, profile=PROFILED_SHAPES if profile else 0,
                            ncu=PROFILED_SHAPES if ncu else 0)
    from_accepted = kernel is None
    kernel, written_for = kernel_to_evaluate(op, kernel, kernel_for, where)
    run = RunDir(where, "bench-" + new_run_id(op))
    timing.profile_dir = run.path
    if on_start is not None:
        on_start(run.path)
    verdict = evaluator(where, device=device, seed=seed, timeout_s=timeout_s, timing=timing, kernel_for=written_for,
                        channels_last=check_channels_last(op, channels_last))(op, kernel)
    run.write("verdict.json", verdict.model_dump_json(indent=2) + "\n")
    bench_file, records = write_bench(run.path, verdict)
    if from_accepted and verdict.passed and verdict.geomean_speedup() is not None:
        record_overload_speed(kernel.parent, op, verdict, run.path.name)
    return BenchResult(verdict, run.path, bench_file, records)


def record_overload_speed(folder: Path, op: str, verdict, bench_run: str) -> None:
    """An accepted kernel timed as ``op`` (``bbagent bench``): its speed as served goes into its
    meta.json (``overload_speedups``), which ``enable()`` and the review flags read."""
    from agent.review.lifecycle import now, read_meta, write_meta
    meta = read_meta(folder)
    meta.setdefault("overload_speedups", {})[op] = {
        "geomean_speedup": verdict.geomean_speedup(), "gpu": verdict.environment.gpu, "at": now(),
        "bench_run": bench_run}
    write_meta(folder, meta)


# --- prompt, generate ----------------------------------------------------------------------------

def what_to_ask_for(op: str, exact_overload: bool = False) -> tuple[str, list[str]]:
    """The overload to ask the model for and every overload its kernel is tested and served as:
    the family's functional overload and the whole family, unless ``exact_overload`` (or the
    overload has no functional sibling)."""
    check_op(op)
    family = family_of_overload(op)
    if exact_overload or family["functional"] is None:
        return op, [op]
    return family["functional"], family["serves"]


def prompt(op: str, *, exact_overload: bool = False, device: str | None = None, channels_last: bool = False) -> str:
    """The first message ``generate`` sends for ``op`` with these options."""
    from agent.prompting import render_prompt
    computation, serves = what_to_ask_for(op, exact_overload)
    return render_prompt(computation, also_serves=serves[1:], device=device,
                         channels_last=check_channels_last(computation, channels_last))


def check_channels_last(op: str, wanted: bool, quiet: bool = False) -> bool:
    """Whether ``op``'s trace inputs also run channels-last: asked for, and ``op`` in a family whose
    ops models feed such tensors (``harness.layouts``). Asked for another op: a UsageError, or
    False when ``quiet`` (a batch applies it where it applies)."""
    if not wanted:
        return False
    from agent.prompting import family_of
    from harness.layouts import CHANNELS_LAST_FAMILIES
    family = family_of(op)
    if family in CHANNELS_LAST_FAMILIES:
        return True
    if quiet:
        return False
    raise UsageError(f"--channels-last applies to the {', '.join(sorted(CHANNELS_LAST_FAMILIES))} families; "
                     f"{op} is in '{family}'")


def check_generate_options(*, provider: str = "openai", model: str | None = None, rounds: int = 5,
                           candidates: int = 1, retries: int = 5, max_output_tokens: int = 8192,
                           max_cost_usd: float | None = None, max_tokens: int | None = None,
                           target_speedup: float = 1.0, **_) -> None:
    """generate's options that can be wrong whatever the operator: checked by a batch before it starts."""
    from agent.providers import PROVIDERS
    if provider not in PROVIDERS:
        raise UsageError(f"unknown provider '{provider}'; choose one of {', '.join(PROVIDERS)}")
    if provider != "replay" and not model:
        example = "gpt-5" if provider == "openai" else "claude-sonnet-4-5"
        raise UsageError(f"--model is required with --provider {provider} (for example --model {example})")
    for name, value, minimum in (("--rounds", rounds, 1), ("--candidates", candidates, 1), ("--retries", retries, 1),
                                 ("--max-output-tokens", max_output_tokens, None),
                                 ("--max-cost-usd", max_cost_usd, None), ("--max-tokens", max_tokens, None)):
        positive(name, value, minimum)
    if target_speedup < 0:
        raise UsageError(f"--target-speedup must be 0 or more (got {target_speedup})")


def generate(op: str, *, provider: str = "openai", model: str | None = None, rounds: int = 5, candidates: int = 1,
             root: str | Path | None = None, device: str | None = None, base_url: str | None = None,
             replay: str | Path | None = None, max_output_tokens: int = 8192, temperature: float | None = None,
             retries: int = 5, max_cost_usd: float | None = None, max_tokens: int | None = None,
             target_speedup: float = 1.0, exact_overload: bool = False, timeout_s: float = 300.0,
             seed: int | None = None, max_shapes: int = 24, target_ms: float = 25.0, no_cache: bool = False,
             allow_no_opinfo: bool = False, report: Callable[[str, dict], None] | None = None,
             executor=None, limiter=None, extra_traces: dict | None = None, baseline: str = "eager",
             inductor_mode: str = "default", channels_last: bool = False, target_baseline: str = "eager"):
    """Ask ``provider``'s ``model`` for a kernel for ``op`` for up to ``rounds`` rounds (see the
    README for every option) and return the Outcome (status accepted, failed, stopped, error or
    interrupted; ``run_dir``; ``accepted_dir``). ``report(event, data)`` hears the progress: start,
    asking, retry, evaluating, candidate, round, best. A KeyboardInterrupt propagates after the run
    directory is recorded as interrupted. A batch passes its ``executor`` (where evaluations run),
    its shared ``limiter`` (``agent.providers.limiter.RateLimiter``) and a dataset's
    ``extra_traces`` (``harness.evaluate.evaluate``)."""
    from agent.llm_log import FILE_NAME, LLMLog
    from agent.loop import Agent
    from agent.providers import RetryPolicy, make_provider
    from agent.providers.logged import LoggedProvider
    from agent.storage import RunDir, new_run_id
    check_generate_options(provider=provider, model=model, rounds=rounds, candidates=candidates, retries=retries,
                           max_output_tokens=max_output_tokens, max_cost_usd=max_cost_usd, max_tokens=max_tokens,
                           target_speedup=target_speedup)
    computation, serves = what_to_ask_for(op, exact_overload)
    check_evaluation(device, timeout_s, allow_no_opinfo)
    channels_last = check_channels_last(computation, channels_last)
    if target_baseline not in ("eager", "inductor"):
        raise UsageError(f"--target-baseline must be eager or inductor (got {target_baseline!r})")
    if target_baseline == "inductor" and "inductor" not in check_baseline(baseline, inductor_mode):
        baseline += ",inductor"  # a target over inductor needs inductor timed
    where = resolve_root(root, write=True)
    timing = timing_options(where, max_shapes=max_shapes, target_ms=target_ms, no_cache=no_cache,
                            baseline=baseline, inductor_mode=inductor_mode)
    report = report or (lambda event, data: None)
    log = LLMLog(where / "runs" / FILE_NAME)
    inner = make_provider(provider, op=computation, model=model, base_url=base_url,
                          replay=str(replay) if replay is not None else None, max_output_tokens=max_output_tokens,
                          temperature=temperature, retry=RetryPolicy(attempts=retries), log=log, root=where)
    inner.on_retry = lambda info: report("retry", info)
    inner.limiter = limiter
    if max_cost_usd is not None:
        require_price(inner.model)
    run = RunDir(where, new_run_id(computation))
    logged = LoggedProvider(inner, log, run_id=run.path.name, op=computation, use_cache=not no_cache,
                            params={"max_output_tokens": max_output_tokens, "temperature": temperature})
    report("start", {"op": op, "computation": computation, "serves": serves, "provider": logged.name,
                     "model": logged.model, "rounds": rounds, "candidates": candidates, "run_dir": str(run.path)})
    agent = Agent(op=computation, serves=serves, device=device, provider=logged, channels_last=channels_last,
                  target_baseline=target_baseline,
                  evaluate=evaluator(where, device=device, seed=seed, timeout_s=timeout_s, timing=timing,
                                     overloads=serves, executor=executor, extra_traces=extra_traces,
                                     channels_last=channels_last),
                  run=run, root=where, rounds=rounds, target_speedup=target_speedup, report=report,
                  max_cost_usd=max_cost_usd, max_tokens=max_tokens, candidates=candidates,
                  config={"device": device, "timeout_s": timeout_s, "seed": seed, "max_shapes": max_shapes,
                          "target_ms": target_ms, "no_cache": no_cache, "baseline": ",".join(timing.baselines),
                          "inductor_mode": inductor_mode, "channels_last": channels_last})
    return agent.generate()


# --- batches -------------------------------------------------------------------------------------

def batch_selection(ops: list[str] | None = None, *, ops_file: str | Path | None = None, suite: str | None = None,
                    family: str | None = None, dataset: str | Path | None = None, include_synthetic: bool = False,
                    exact_overload: bool = False):
    """The operators a batch runs (an ``agent.batch.selection.Selection``): named by ``ops`` and
    ``ops_file`` (one exact overload per line, ``#`` comments), or a ``suite`` and/or prompt
    ``family``, or a BackendBench-format ``dataset`` file; one per variant family unless
    ``exact_overload``. Every name is checked before anything starts."""
    from agent.batch import selection as select
    sources = [name for name, given in (("--ops/--ops-file", ops or ops_file), ("--suite/--family", suite or family),
                                        ("--dataset", dataset)) if given]
    if len(sources) > 1:
        raise UsageError(f"choose the operators one way: {' or '.join(sources)}")
    if include_synthetic and not dataset:
        raise UsageError("--include-synthetic applies to --dataset")
    try:
        if dataset:
            chosen = select.by_dataset(select.read_dataset(dataset), include_synthetic)
        elif suite or family:
            chosen = select.by_suite(suite or "all", family, _listed_ops(suite or "all", family))
        else:
            chosen = select.by_name(list(ops or []) + (select.read_ops_file(ops_file) if ops_file else []))
    except select.SelectionError as exc:
        raise UsageError(str(exc)) from None
    if not chosen.ops and not chosen.skipped:
        raise UsageError("no operators: pass --ops aten.relu.default,aten.add.Tensor, --ops-file FILE, --suite, "
                         "--family or --dataset")
    return chosen if exact_overload else select.one_per_family(chosen, family_of_overload)


PROFILED_SHAPES = 2  # bench --profile and --ncu: the largest timed shapes, each for eager and the kernel
OPTIONS_ADDED_LATER = {"baseline": "eager", "inductor_mode": "default", "channels_last": False,
                       "target_baseline": "eager"}


def batch(ops: list[str] | None = None, *, ops_file: str | Path | None = None, suite: str | None = None,
          family: str | None = None, dataset: str | Path | None = None, include_synthetic: bool = False,
          resume: str | None = None, jobs: int | None = None, gpus: list[int] | None = None, llm_concurrency: int = 8,
          force: bool = False, root: str | Path | None = None, lease_s: float = 120.0,
          batch_max_cost_usd: float | None = None, batch_max_tokens: int | None = None,
          deadline: str | None = None, infra_pause_s: tuple[float, float] | None = None,
          executor: str = "local", ray_address: str | None = None, ray_resource: str = "GPU",
          report: Callable[[str, dict], None] | None = None, **generate_options):
    """Run ``generate`` for every operator of the selection (``batch_selection``; ``generate_options``
    as for ``generate``): ``jobs`` agent loops at once (default twice the evaluation slots, at least
    4, so that every GPU has a candidate waiting), their LLM calls through one shared rate
    limiter (``llm_concurrency`` calls in flight, a 429 backs every call off), their evaluations
    one at a time per GPU of ``gpus`` (default: every visible one). Recorded in
    ``ROOT/runs/<batch>/`` (ledger, events, summary); operators an accepted kernel serves are
    skipped unless ``force``. ``resume`` continues a batch by id with its own operators and options,
    re-running its interrupted operators, those whose process died (their ``lease_s`` lapsed: the
    coordinator renews it every third of that while it lives), and those finished under another
    resume key (torch, triton, GPU model or prompt templates changed). Batch budgets: once
    ``batch_max_cost_usd`` or ``batch_max_tokens`` is spent or the ``deadline`` ("HH:MM", the next
    such time) has passed, nothing new starts (``generate_options`` keep each operator's own
    ``max_cost_usd``/``max_tokens``). ``infra_pause_s`` (first, longest) is the shared pause after a
    provider failure (default 5 s doubling to 300 s). ``executor`` "ray" evaluates on the Ray
    cluster at ``ray_address`` (default RAY_ADDRESS, else one started here), one evaluation at a
    time per unit of ``ray_resource`` on each node (``agent.batch.ray_executor``); the agent loops
    stay here. Returns a BatchResult."""
    from agent.batch.executor import LocalExecutor
    from agent.batch.ledger import FILE_NAME
    from agent.batch.runner import Batch, Budgets, coordinator_state, new_batch_id
    from agent.providers.limiter import RateLimiter
    positive("--jobs", jobs, minimum=1)
    positive("--llm-concurrency", llm_concurrency, minimum=1)
    positive("--lease", lease_s)
    positive("--max-cost-usd", batch_max_cost_usd)
    positive("--max-tokens", batch_max_tokens)
    budgets = Budgets(batch_max_cost_usd, batch_max_tokens, next_time_of_day(deadline) if deadline else None)
    where = resolve_root(root, write=True)
    if resume is not None:
        if ops or ops_file or suite or family or dataset:
            raise UsageError("--resume continues a batch with its own operators: drop --ops, --ops-file, --suite, "
                             "--family and --dataset")
        path = where / "runs" / resume
        if not (path / FILE_NAME).is_file():
            raise UsageError(f"no batch '{resume}' under {where / 'runs'} (see `bbagent status`)")
        from agent.batch.ledger import Ledger
        meta = Ledger(path / FILE_NAME).meta()
        own = meta["generate_options"]
        own = {**OPTIONS_ADDED_LATER, **own}  # a batch from before an option ran with its default
        differing = [f"{OPTION_FLAGS.get(k, '--' + k.replace('_', '-'))} (the batch's: {own.get(k)!r})"
                     for k, v in generate_options.items() if v is not None and v != own.get(k)]
        if differing:
            raise UsageError("--resume continues a batch with its own options: drop " + ", ".join(differing))
        generate_options = own
    check_generate_options(**generate_options)
    check_baseline(generate_options.get("baseline") or "eager", generate_options.get("inductor_mode") or "default")
    check_provider(generate_options)
    if batch_max_cost_usd is not None and generate_options.get("provider") != "replay":
        require_price(generate_options.get("model"))
    device = generate_options.get("device")
    if executor not in ("local", "ray"):
        raise UsageError(f"--executor must be 'local' or 'ray' (got {executor!r})")
    if executor == "local" and (ray_address or ray_resource != "GPU"):
        raise UsageError("--ray-address and --ray-resource go with --executor ray")
    if executor == "ray":
        if gpus:
            raise UsageError("--gpus picks GPUs of this machine; --executor ray uses every GPU of the cluster")
        evaluations = ray_executor(device, ray_address, ray_resource, generate_options)
    else:
        check_evaluation(device, generate_options.get("timeout_s", 300.0),
                         generate_options.get("allow_no_opinfo", False))
        from harness.evaluate import default_device
        evaluations = LocalExecutor(device or default_device(), gpus=check_gpus(gpus, device or default_device()))
    try:  # a cluster's supervisors hold GPUs: let them go however the batch ends
        device = evaluations.device
        jobs = jobs or max(4, 2 * len(evaluations.slots))
        key = resume_key(generate_options, device, evaluations.gpu_label())
        runner_options = dict(jobs=jobs, report=report, lease_s=lease_s, budgets=budgets, executor=evaluations,
                              limiter=RateLimiter(llm_concurrency),
                              **({"pause_s": infra_pause_s} if infra_pause_s else {}))
        if resume is not None:
            state = coordinator_state(meta)
            if state == "alive":
                pid = meta["coordinator"]["pid"]
                raise UsageError(f"batch {resume} is still running (process {pid} on this host): wait for it, or stop "
                                 f"it (Ctrl-C, or kill {pid}) and resume then")
            runner = Batch(path, None, **runner_options)
            reopened = runner.ledger.reopen(key, coordinator_dead=state == "dead")
            (report or (lambda e, d: None))("resume", reopened)
        else:
            chosen = batch_selection(ops, ops_file=ops_file, suite=suite, family=family, dataset=dataset,
                                     include_synthetic=include_synthetic,
                                     exact_overload=bool(generate_options.get("exact_overload")))
            served = {op for entry in kernels(where) for op in entry["serves"]}
            skipped = dict(chosen.skipped)
            if not force:
                skipped.update({op: "an accepted kernel serves it already (--force to redo)"
                                for op in chosen.ops if op in served})
            path = where / "runs" / new_batch_id()
            path.mkdir(parents=True)
            runner = Batch(path, None, **runner_options)
            runner.ledger.key = key
            runner.ledger.set_meta(generate_options=generate_options, created_at=time.time(), jobs=jobs,
                                   resume_key=key, extra_traces=chosen.extra_traces,
                                   selection={"ops": ops, "ops_file": str(ops_file) if ops_file else None,
                                              "suite": suite,
                                              "family": family, "dataset": str(dataset) if dataset else None,
                                              "include_synthetic": include_synthetic})
            if chosen.dataset is not None:
                (path / "dataset.json").write_text(json.dumps(chosen.dataset, indent=1) + "\n")
            runner.ledger.add(chosen.ops + [op for op in skipped if op not in chosen.ops], skipped)
        extra = runner.ledger.meta().get("extra_traces") or {}
        options = {**generate_options, "device": device}

        def generate_one(op: str, hear):
            serves = family_of_overload(op)["serves"] if not options.get("exact_overload") else [op]
            mine = {name: extra[name] for name in dict.fromkeys([op] + serves) if name in extra}
            layout = check_channels_last(serves[0], bool(options.get("channels_last")), quiet=True)
            return generate(op, root=where, report=hear, executor=evaluations, limiter=runner.limiter,
                            extra_traces=mine or None, **{**options, "channels_last": layout})
        runner.generate = generate_one
        return runner.run()
    finally:
        evaluations.close()


def ray_executor(device: str | None, address: str | None, resource: str, generate_options: dict):
    """A RayExecutor for a batch. The device defaults to ``cuda`` for the GPU resource and to
    ``cpu`` for a custom one; this machine (the driver) needs no GPU of its own, so CUDA is not
    checked here. OpInfo is, as the supervisors run the same bbagent."""
    from agent.batch.ray_executor import RayExecutor, import_ray
    import_ray()
    if not resource or not resource.strip():
        raise UsageError("--ray-resource needs a resource name (GPU, or a custom one the nodes declare)")
    device = device or ("cuda" if resource == "GPU" else "cpu")
    check_evaluation(None if device == "cuda" else device, generate_options.get("timeout_s", 300.0),
                     generate_options.get("allow_no_opinfo", False))
    return RayExecutor(device, address=address, resource=resource)


OPTION_FLAGS = {"timeout_s": "--timeout", "max_cost_usd": "--max-cost-per-op", "max_tokens": "--max-tokens-per-op"}


def _listed_ops(suite: str, family: str | None) -> list[dict]:
    return ops(suite, family=family)


def check_provider(generate_options: dict) -> None:
    """A batch's provider can be set up (its key is there) before any operator starts: raises
    ProviderError naming the fix. A replay is checked per operator (each has its own answers)."""
    from agent.providers import RetryPolicy, make_provider
    if generate_options.get("provider", "openai") != "replay":
        make_provider(generate_options.get("provider", "openai"), op="", model=generate_options.get("model"),
                      base_url=generate_options.get("base_url"), retry=RetryPolicy())


def require_price(model: str | None) -> None:
    """A cost budget needs the model's price (a run's ``--max-cost-usd`` or a batch's)."""
    from agent.llm_log import price_of
    if price_of(model) is None:
        raise UsageError(f"--max-cost-usd needs a price for model '{model}': add it to agent/prices.json "
                         "(USD per million input and output tokens) or drop --max-cost-usd")


def check_gpus(gpus: list[int] | None, device: str) -> list[int] | None:
    """The GPUs a batch evaluates on (default every visible one), each checked to exist."""
    if device == "cpu":
        if gpus:
            raise UsageError("--gpus needs a CUDA device; this batch evaluates on the CPU")
        return None
    import torch
    count = torch.cuda.device_count()
    if not gpus:
        return list(range(count))
    wrong = [g for g in gpus if not 0 <= g < count]
    if wrong or len(set(gpus)) != len(gpus):
        raise UsageError(f"--gpus {','.join(map(str, gpus))}: this process sees {count} GPU(s), numbered "
                         f"0 to {count - 1}, each named once")
    return list(gpus)


def resume_key(generate_options: dict, device: str, gpu: str | None = None) -> dict:
    """What an operator's result depends on beyond the operator: the prompt templates, the provider
    and model, torch, triton and the GPU model. A resumed batch re-runs operators finished under
    another key. ``gpu``: the GPU model(s) the batch's executor evaluates on (default this machine's)."""
    import hashlib

    import torch
    import triton
    from agent.prompting import PROMPTS_DIR
    templates = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(Path(PROMPTS_DIR).rglob("*.j2")))).hexdigest()
    return {"prompts": templates[:16], "provider": generate_options.get("provider"),
            "model": generate_options.get("model"), "torch": torch.__version__, "triton": triton.__version__,
            "gpu": "cpu" if device == "cpu" else gpu or gpu_model()}


def gpu_model(physical: str | None = None) -> str:
    """The name of the first GPU (or of the GPU of that physical index), from the driver (never
    initialising CUDA in this process)."""
    import subprocess
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
                               + ([f"--id={physical}"] if physical is not None else []), capture_output=True,
                               text=True, timeout=30).stdout.split("\n")
        if names[0].strip():
            return names[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        for line in info.read_text().splitlines():
            if line.startswith("Model:"):
                return line.split(":", 1)[1].strip()
    return "unknown GPU"


def next_time_of_day(text: str) -> float:
    """The next local time "HH:MM" (today if still ahead, else tomorrow), as time.time() counts."""
    import datetime
    try:
        at = datetime.datetime.strptime(text.strip(), "%H:%M").time()
    except ValueError:
        raise UsageError(f"--deadline takes a local time HH:MM, e.g. 08:30 (got '{text}')") from None
    now = datetime.datetime.now()
    moment = datetime.datetime.combine(now.date(), at)
    if moment <= now:
        moment += datetime.timedelta(days=1)
    return moment.timestamp()


def batch_status(batch_id: str | None = None, root: str | Path | None = None) -> dict:
    """A batch's counts and rows from its ledger (the newest batch when no id), readable while it runs."""
    from agent.batch.ledger import FILE_NAME, Ledger
    where = resolve_root(root)
    batches = sorted(p.name for p in (where / "runs").glob("batch-*") if (p / FILE_NAME).is_file())
    if not batches:
        raise UsageError(f"no batch under {where / 'runs'}: start one with `bbagent batch`")
    name = batch_id or batches[-1]
    if name not in batches:
        raise UsageError(f"no batch '{name}' under {where / 'runs'}; there are: {', '.join(batches[-5:])}")
    ledger = Ledger(where / "runs" / name / FILE_NAME)
    meta = ledger.meta()
    return {"batch_id": name, "counts": ledger.counts(), "ops": ledger.rows(), "activity": meta.get("activity"),
            "ended_by": meta.get("ended_by")}


# --- listings, loading ---------------------------------------------------------------------------

def runs(root: str | Path | None = None) -> list[dict]:
    """Every run and batch under ``ROOT/runs``, oldest first (``bbagent runs --json`` rows)."""
    from agent.runs import list_runs
    return list_runs(resolve_root(root) / "runs")


def prune_runs(older_than_days: float, root: str | Path | None = None, dry_run: bool = False) -> dict:
    """Remove runs and batches older than ``older_than_days`` that nothing kept refers to and that
    are not running (``agent.runs.prune``); ``dry_run`` only says what would go."""
    from agent.runs import prune
    if older_than_days < 0:
        raise UsageError(f"--older-than takes days, 0 or more (got {older_than_days})")
    return prune(resolve_root(root, write=not dry_run), older_than_days * 86400, dry_run=dry_run)


def ops(suite: str = "all", pattern: str | None = None, family: str | None = None) -> list[dict]:
    """The overloads bbagent can test (``bbagent ops --json`` rows), filtered by a substring of
    the name and by prompt family."""
    from agent.prompting import family_of
    from harness.coverage import SUITES, list_ops
    if suite not in SUITES:
        raise UsageError(f"unknown suite '{suite}'; choose one of {', '.join(SUITES)}")
    rows = list_ops(suite)
    for row in rows:
        row["family"] = family_of(row["op"])
    return [row for row in rows if (not pattern or pattern in row["op"]) and (not family or row["family"] == family)]


def kernels(root: str | Path | None = None) -> list[dict]:
    """The accepted kernels under ``root``: meta.json of each, with what it serves."""
    from agent.served import accepted
    return accepted(resolve_root(root))


def load(op: str, root: str | Path | None = None) -> Callable:
    """A callable with ``op``'s calling convention, from the accepted kernel that serves it (imported
    into this process: use it for reviewed kernels)."""
    from agent.served import load as load_kernel
    check_op(op)
    try:
        return load_kernel(resolve_root(root), op)
    except LookupError as exc:
        raise UsageError(str(exc)) from None


def enable(root: str | Path | None = None, *, include_unreviewed: bool = False, include_slower: bool = False,
           device: str = "cuda", ops: list[str] | None = None):
    """Make PyTorch run the approved kernels under ``root`` (``agent.enable``): each served overload
    registered for ``device``'s dispatch key, aten's own kernel kept as the fallback. Only approved,
    non-stale versions (``include_unreviewed``: the current one unless rejected), and only overloads
    measured at least as fast as eager (``include_slower``: all). Returns an ``Enabled`` (a context
    manager: ``with bbagent.enable(): ...``) with ``calls()``, ``served`` and ``skipped``."""
    from agent.enable import DISPATCH_KEYS, enable as enable_kernels
    if device not in DISPATCH_KEYS:
        raise UsageError(f"device must be one of {', '.join(DISPATCH_KEYS)} (got '{device}')")
    for op in ops or []:
        check_op(op)
    try:
        return enable_kernels(resolve_root(root), include_unreviewed=include_unreviewed,
                              include_slower=include_slower, device=device, ops=ops)
    except RuntimeError as exc:
        raise UsageError(str(exc)) from None


def disable() -> dict | None:
    """Give aten its kernels back; returns the calls served per overload (None if none was enabled)."""
    from agent.enable import disable as disable_kernels
    return disable_kernels()


def check_model(model: str, *, root: str | Path | None = None, device: str | None = None, dtype: str = "float32",
                config: dict | None = None, ops: list[str] | None = None, include_unreviewed: bool = False,
                include_slower: bool = False, atol: float = 1e-3, rtol: float = 1e-3, repeats: int = 5,
                iterations: int = 10, seed: int = 0, timeout_s: float = 1800.0) -> dict:
    """Run ``model`` (``agent.models``) forward with the enabled kernels and eagerly, in a child
    process (``agent.check_model``); returns the comparison, the overloads served with their call
    counts, the timing and, on a mismatch, the culprit overloads."""
    import subprocess
    import sys
    import tempfile

    from agent.check_model import CHILD_USAGE_ERROR
    from agent.models import config_for
    from harness.evaluate import default_device
    device = device or default_device()
    if device == "cuda" and default_device() != "cuda":
        raise UsageError("--device cuda: no CUDA device is visible here")
    try:
        full_config = config_for(model, config)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if dtype not in ("float32", "float16", "bfloat16"):
        raise UsageError(f"--dtype takes float32, float16 or bfloat16 (got '{dtype}')")
    for op in ops or []:
        check_op(op)
    positive("--repeats", repeats, minimum=1)
    positive("--iterations", iterations, minimum=1)
    where = resolve_root(root)
    spec = {"model": model, "config": full_config, "device": device, "dtype": dtype, "ops": ops, "seed": seed,
            "root": str(where), "include_unreviewed": include_unreviewed, "include_slower": include_slower,
            "atol": atol, "rtol": rtol, "repeats": repeats, "iterations": iterations}
    env = dict(os.environ, TRITON_INTERPRET="1") if device == "cpu" else dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="bbagent-check-model-") as scratch:
        spec_file, result_file = Path(scratch) / "spec.json", Path(scratch) / "result.json"
        spec_file.write_text(json.dumps(spec))
        try:
            done = subprocess.run([sys.executable, "-m", "agent.check_model", str(spec_file), str(result_file)],
                                  capture_output=True, text=True, timeout=timeout_s, env=env, cwd=scratch)
        except subprocess.TimeoutExpired:
            return {**spec, "match": False, "crashed": f"stopped after {timeout_s:g} s (--timeout)"}
        result = json.loads(result_file.read_text()) if result_file.is_file() else None
    if done.returncode == CHILD_USAGE_ERROR and result:
        raise UsageError(result["usage_error"])
    if done.returncode != 0 or result is None:  # a kernel (or the model) took the child down
        return {**spec, "match": False, "crashed": f"the child process exited with {done.returncode}",
                "stderr_tail": done.stderr[-3000:]}
    result["child_stdout_tail"] = done.stdout[-2000:]
    return result


def report(ident: str | None = None, *, root: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Write the HTML report of a batch (default: the newest) or a run (``agent.html_report``);
    returns its path (default ``runs/<id>/report.html``)."""
    import importlib.util
    from agent.html_report import ReportError, write_report
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError("bbagent report draws its charts with matplotlib: pip install 'bbagent[report]' "
                         "(or pip install matplotlib)")
    where = resolve_root(root, write=out is None)
    try:
        return write_report(where, ident, Path(out) if out is not None else None)
    except ReportError as exc:
        raise UsageError(str(exc)) from None


# --- review ----------------------------------------------------------------------------------------

@contextmanager
def _review_errors():
    from agent.review.lifecycle import ReviewError
    try:
        yield
    except ReviewError as exc:
        raise UsageError(str(exc)) from None


def review_list(root: str | Path | None = None, *, status: str | None = None, family: str | None = None,
                sort: str = "op") -> list[dict]:
    """One row per operator with an accepted kernel (``bbagent review list --json``): version, review
    status (``stale`` where the environment changed since its tests), tests, speedup, cost, flags."""
    from agent.review.catalog import listing
    with _review_errors():
        return listing(resolve_root(root), status=status, family=family, sort=sort)


def review_show(op: str, root: str | Path | None = None, version: int | None = None) -> dict:
    """Everything a reviewer reads about one version of ``op``'s kernel (default: the current one)."""
    from agent.review.catalog import find, flags
    from agent.review.lifecycle import changes
    where = resolve_root(root)
    with _review_errors():
        entry = find(where, op)
        chosen = entry.version(version)
    meta = chosen.meta
    transcript = where / "runs" / str(meta.get("run_id"))
    return {"op": op, "version": chosen.number, "current": chosen.current, "status": chosen.status,
            "changes": changes(meta), "flags": flags(meta), "meta": meta, "dir": str(chosen.folder),
            "kernel_source": chosen.kernel.read_text(), "transcript": str(transcript) if transcript.is_dir() else None,
            "versions": [{"version": v.number, "status": v.status, "run_id": v.meta.get("run_id"), "dir": str(v.folder)}
                         for v in entry.versions],
            "served_version": (entry.served().number if entry.served() else None)}


def review_decide(op: str, decision: str, note: str = "", *, root: str | Path | None = None,
                  version: int | None = None) -> dict:
    """``approve`` or ``reject`` one version of ``op``'s kernel; returns its new review record."""
    from agent.review.catalog import decide
    status = {"approve": "approved", "reject": "rejected"}[decision]
    with _review_errors():
        chosen = decide(resolve_root(root, write=True), op, status, note, version)
    return {"op": op, "version": chosen.number, **{k: v for k, v in chosen.meta["review"].items() if k != "history"}}


def review_diff(op: str, root: str | Path | None = None, version: int | None = None,
                against: int | None = None) -> str:
    """A unified diff of ``op``'s kernel (default: current) against the version before it."""
    from agent.review.catalog import diff
    with _review_errors():
        return diff(resolve_root(root), op, version, against)


def review_verify(op: str | None = None, *, root: str | Path | None = None, force: bool = False,
                  device: str | None = None, timeout_s: float = 600.0, allow_no_opinfo: bool = False,
                  on_start: Callable[[str, int], None] | None = None) -> list[dict]:
    """Re-test every stale approved kernel (of ``op``, or of all), timed where there is a GPU;
    ``force`` re-tests every approved one. Returns one outcome per version tested."""
    from agent.review.verify import stale_versions, verify
    check_evaluation(device, timeout_s, allow_no_opinfo)
    where = resolve_root(root, write=True)
    with _review_errors():
        chosen = stale_versions(where, op, force)
    from harness.evaluate import default_device
    timed = (device or default_device()) == "cuda"
    timing = timing_options(where, max_shapes=64, target_ms=100.0, no_cache=False) if timed else None
    results = []
    for name, kernel_version in chosen:
        if on_start is not None:
            on_start(name, kernel_version.number)
        run = evaluator(where, device=device, seed=None, timeout_s=timeout_s, timing=timing,
                        kernel_for=kernel_version.meta.get("written_for", name),
                        overloads=kernel_version.meta.get("serves"))
        results.append(verify(where, kernel_version, lambda o, k, _overloads: run(o, k)))
    return results


def verdict_schema() -> dict:
    """The JSON schema of the Verdict (``bbagent schema verdict``)."""
    from harness.verdict import Verdict
    return Verdict.model_json_schema()
