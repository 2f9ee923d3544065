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
line (``bbagent.cli``) is a thin layer over these functions, and these over the modules of
``agent/``, none of which imports this package.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Callable

# Importing bbagent imports nothing of agent/ or harness/: every process that runs bbagent's code
# imports this package first (a sandbox child, `python -m bbagent.harness.sandbox.child.worker`, included),
# and a child must not load the agent side. The public types are imported when first asked for.
_TYPES = {"UsageError": "bbagent.agent.errors", "ProviderError": "bbagent.agent.errors",
          "Verdict": "bbagent.harness.interface", "Outcome": "bbagent.agent.generate.loop",
          "BenchResult": "bbagent.agent.bench.run", "GenerateOptions": "bbagent.agent.options"}


def __getattr__(name: str):
    """The public types, imported on first use (most pull in pydantic or torch)."""
    if name in _TYPES:
        return getattr(importlib.import_module(_TYPES[name]), name)
    raise AttributeError(f"module 'bbagent' has no attribute '{name}'")


def _usage_error(message: str) -> Exception:
    from bbagent.agent.errors import UsageError
    return UsageError(message)


def resolve_root(root: str | Path | None = None, *, write: bool = False) -> Path:
    """The folder for runs/ and generated_kernels/: ``root``, else $BBAGENT_ROOT, else the current
    directory; with ``write`` it is created (UsageError where it cannot be, or is not writable)."""
    from bbagent.agent.storage import resolve_root as resolve
    return resolve(root, write=write)


__all__ = ["UsageError", "ProviderError", "GenerateOptions", "Verdict", "BenchResult", "Outcome", "version",
           "__version__", "resolve_root", "evaluate", "bench", "prompt", "generate", "batch", "batch_status", "runs",
           "prune_runs", "ops", "kernels", "load", "load_program", "export_kernelbench", "enable", "disable", "check_model", "report", "verdict_schema",
           "review_list", "review_show", "review_decide", "review_diff", "review_verify"]


def version() -> str:
    from importlib import metadata
    try:
        return metadata.version("bbagent")
    except metadata.PackageNotFoundError:
        return "0+unknown (not installed)"


__version__ = version()


# --- evaluate, bench, prompt, generate -------------------------------------------------------------

def evaluate(op: str, kernel: str | Path | None = None, *, kernel_for: str | None = None, variants: bool = False,
             root: str | Path | None = None, device: str | None = None, seed: int | None = None,
             timeout_s: float = 300.0, allow_no_opinfo: bool = False, channels_last: bool = False,
             dsl: str = "triton"):
    """Test ``kernel`` (default: the accepted kernel serving ``op`` under ``root``) on ``op``'s tests,
    in a sandboxed child process; ``variants`` tests every variant of it (its functional, in-place and
    out= overloads, as generate serves them); ``channels_last``
    runs the 4-d and 5-d trace inputs in that layout too; ``dsl``: the kernel language it must be
    written in (triton, helion). Returns the Verdict."""
    from bbagent.harness.interface import start_early
    start_early(device if device in ("cuda", "cpu") else None)  # the sandbox's start-up overlaps the checks below
    from bbagent.agent.judging import (Evaluations, check_channels_last, check_evaluation, evaluation_request,
                                          kernel_to_evaluate, problem_of, written_as)
    problem = problem_of(op, to_test=True, family=variants)  # an unknown name is said before anything else
    dsl = _dsl(dsl)
    check_evaluation(device, timeout_s, allow_no_opinfo, dsl)
    channels_last = check_channels_last(op, channels_last)
    where = resolve_root(root, write=kernel is not None)  # made as generate makes it, unless it is read from
    kernel, written_for = kernel_to_evaluate(op, kernel, kernel_for, where)
    problem = written_as(problem, written_for)
    return Evaluations(evaluation_request(problem, where, device=device, seed=seed, timeout_s=timeout_s,
                                          channels_last=channels_last, dsl=dsl)).evaluate(kernel)


def evaluate_program(problem_file: str | Path, answer: str | Path, *, root: str | Path | None = None,
                     device: str | None = None, seed: int | None = None, timeout_s: float = 300.0,
                     allow_library: str = "gemm", dsl: str = "triton"):
    """Test the answer module ``answer`` (defining ``ModelNew``) on the program problem in
    ``problem_file`` (KernelBench's format), in a sandboxed child process; ``allow_library`` (none,
    gemm or all) is what the answer may leave to torch; ``dsl`` the kernel language it must be written in. Returns the Verdict. A file that is no
    problem, or an answer file that is missing, is a UsageError; an answer without ``ModelNew`` fails."""
    from bbagent.harness.interface import start_early
    start_early(device if device in ("cuda", "cpu") else None)
    from bbagent.agent.judging import Evaluations, check_evaluation, evaluation_request, program_of
    from bbagent.harness.interface import LIBRARY_POLICIES
    if allow_library not in LIBRARY_POLICIES:
        raise _usage_error(f"allow_library takes {', '.join(LIBRARY_POLICIES[:-1])} or {LIBRARY_POLICIES[-1]} "
                           f"(got {allow_library!r})")
    problem, facts = program_of(problem_file)  # a file that is no problem, or a program that cannot run, said first
    dsl = _dsl(dsl)
    check_evaluation(device, timeout_s, False, dsl)
    answer = Path(answer)
    if not answer.is_file():
        raise _usage_error(f"answer file not found: {answer}")
    return Evaluations(evaluation_request(problem, resolve_root(root, write=True), device=device, seed=seed,
                                          timeout_s=timeout_s, allow_library=allow_library,
                                          facts=facts, dsl=dsl)).evaluate(answer)


def bench(op: str | None = None, kernel: str | Path | None = None, *, problem: str | Path | None = None,
          root: str | Path | None = None, on_start: Callable[[Path], None] | None = None, **settings):
    """Test the kernel (default: the accepted one serving ``op``), time it and eager aten on ``op``'s
    trace shapes (GPU), and write one benchmark record per (input, engine) to
    ``root/runs/bench-<id>/bench.jsonl``; ``settings`` are ``agent.bench.run.BenchRequest``'s
    (kernel_for, device, seed, timeout_s, max_shapes, target_ms, no_cache, allow_no_opinfo,
    baseline "eager,inductor", inductor_mode, channels_last, profile, ncu, extra_traces: more inputs
    per operator name as a dataset gives them, timed first). ``on_start`` hears the
    run directory before the evaluation starts. Returns a ``BenchResult``. With ``problem`` (a
    program in KernelBench's format) instead of ``op``: its answer (``kernel``, default the accepted
    one; ``allow_library`` its policy) timed against eager and, with ``baseline="eager,inductor"``,
    torch.compile in ``inductor_mode`` (default or max-autotune, without CUDA graphs), on the
    problem's own inputs (``profile``: the torch profiler's traces of both kept in the run)."""
    from bbagent.agent.bench.run import BenchRequest, run_bench, run_program_bench
    known = list(BenchRequest.__dataclass_fields__)
    _refuse_unknown("bench", settings, known, ", ".join(known))
    asked = _one_of(op, problem)
    request = BenchRequest(kernel=kernel, **settings)
    if op is not None:
        return run_bench(op, request, resolve_root(root, write=True), on_start)
    from bbagent.agent.judging import refuse_operator_flags
    refuse_operator_flags({"--kernel-for": request.kernel_for, "--channels-last": request.channels_last,
                           "extra_traces": request.extra_traces, "--ncu": request.ncu})
    return run_program_bench(asked, request, resolve_root(root, write=True), on_start)


def _refuse_unknown(what: str, given: dict, known, listing: str) -> None:
    """A UsageError naming the options in ``given`` that are not ``known``, and ``listing`` the ones there are."""
    unknown = [name for name in given if name not in known]
    if unknown:
        raise _usage_error(f"{what} has no option {', '.join(map(repr, unknown))}; its options are: {listing}")


def _dsl(name: str) -> str:
    """``name`` where it is a kernel language bbagent asks in; else a UsageError naming them."""
    from bbagent.agent.options import DSL_NAMES
    if name not in DSL_NAMES:
        raise _usage_error(f"dsl takes {', '.join(DSL_NAMES)} (got {name!r})")
    return name


def prompt(op: str, *, exact_overload: bool = False, device: str | None = None, channels_last: bool = False,
           dsl: str = "triton") -> str:
    """The first message ``generate`` sends for ``op`` with these options (``dsl``: the kernel
    language asked for, triton or helion)."""
    from bbagent.agent.generate.posed import posed_operator
    from bbagent.agent.generate.prompting import render_prompt
    operator = posed_operator(op, exact_overload)
    return render_prompt(operator.problem, device=device, channels_last=operator.channels_last(channels_last),
                         dsl=_dsl(dsl))


def program_prompt(problem_file: str | Path, *, device: str | None = None, allow_library: str = "gemm",
                   dsl: str = "triton") -> str:
    """The first message for the program problem in ``problem_file`` (KernelBench's format: ``Model``,
    ``get_inputs``, ``get_init_inputs``), judged on ``device``, with ``allow_library`` (none, gemm or
    all) what the answer may leave to torch. A file that is no problem is a UsageError."""
    from bbagent.agent.judging import program_of
    from bbagent.agent.generate.program_prompting import render_program_prompt
    problem, facts = program_of(problem_file)
    return render_program_prompt(problem, facts, device=device, library=allow_library, dsl=_dsl(dsl))


def generate(op: str | None = None, options=None, *, problem: str | Path | None = None,
             root: str | Path | None = None, report: Callable | None = None, **settings):
    """Ask an LLM for a kernel for ``op`` (or, with ``problem``, a ``ModelNew`` for the program in
    that file, KernelBench's format: installed under ``generated_kernels/kernelbench/level<N>/<name>/``)
    and return the Outcome (status accepted, failed, stopped,
    error or interrupted; ``stopped_because``; ``message``; ``run_dir``; ``accepted_dir``; ``spent``;
    ``best``), however the run ended: an operator or file that is no problem, a provider that cannot
    be set up, Ctrl-C and a bug (its traceback kept in a file the message names) are Outcomes too
    (``run_dir`` None where the run never started). A call that is malformed in itself (neither or
    both of ``op`` and ``problem``, options that do not validate) raises UsageError. ``options`` is a
    ``GenerateOptions``, or give its fields as keywords (``provider="replay"``, ``rounds=3``, ...;
    the README lists every one). ``report(event)`` hears the progress, one typed event at a time
    (``agent.generate.progress``: Started, Asking, Retrying, Evaluating, CandidateJudged, RoundDone,
    NewBest, ...); a ``report(name, data)`` of two arguments gets each event's name and fields."""
    from bbagent.agent.generate.start import run_generate
    asked = _one_of(op, problem)
    options = _options(options, settings)
    if op is not None:
        return run_generate(op, options, root, report=report)
    from bbagent.agent.judging import refuse_operator_flags
    refuse_operator_flags({"--exact-overload": options.exact_overload, "--channels-last": options.channels_last})
    return run_generate(Path(asked), options, root, report=report)


def _one_of(op: str | None, problem: str | Path | None) -> str | Path:
    """The one of ``op`` and ``problem`` given (a UsageError unless exactly one is)."""
    if op is not None and problem is None:
        return op
    if problem is not None and op is None:
        return problem
    raise _usage_error("give an operator (op) or a program problem (problem=FILE), one of them")


def _options(options, settings: dict, batch: bool = False):
    from bbagent.agent.options import GenerateOptions
    if options is not None and settings:
        raise _usage_error("give the options as one GenerateOptions or as keywords, not both")
    if options is not None and not isinstance(options, GenerateOptions):
        raise _usage_error(f"options must be a bbagent.GenerateOptions (got {type(options).__name__})")
    return options if options is not None else GenerateOptions.of(batch=batch, **settings)


# --- batches -------------------------------------------------------------------------------------

def batch(ops: list[str] | None = None, options=None, *, root: str | Path | None = None, resume: str | None = None,
          report: Callable | None = None, **settings):
    """Run ``generate`` for many operators, resumably, and return a ``BatchResult``. Which ones:
    ``ops``, or the keywords of ``agent.batch.start.Choice`` (ops_file, suite, family, dataset,
    include_synthetic). How: the keywords of ``agent.batch.start.BatchPlan`` (jobs, gpus, evals_per_gpu,
    llm_concurrency, force, retry_failed (with resume), lease_s, the batch's max_cost_usd / max_tokens / deadline "HH:MM",
    infra_pause_s, executor "local" or "ray", ray_address, ray_resource, ray_device_memory_gib). Each operator's generate
    options: ``options`` (a ``GenerateOptions``) or the keywords of one, where ``max_cost_per_op``
    and ``max_tokens_per_op`` are each operator's budgets. ``resume`` continues a batch by id with
    its own operators and options (options given again must agree). Recorded in
    ``ROOT/runs/<batch>/`` (ledger, events, summary). ``report(event)`` hears the batch's events
    one at a time (``agent.batch.events``: BatchStarted, OpStarted, OpEnded, ...; an operator's run's
    as ``RunProgress``); a ``report(name, data)`` of two arguments gets each one's name and fields."""
    from dataclasses import fields

    from bbagent.agent.batch.start import Choice, BatchPlan, run_batch
    from bbagent.agent.options import GenerateOptions
    picked = {kind: {f.name: settings.pop(f.name) for f in fields(kind) if f.name in settings} for kind in (Choice, BatchPlan)}
    for per_op, field in (("max_cost_per_op", "max_cost_usd"), ("max_tokens_per_op", "max_tokens")):
        if per_op in settings:
            settings[field] = settings.pop(per_op)
    _refuse_unknown("batch", settings, GenerateOptions.model_fields,
                    f"those of Choice ({', '.join(f.name for f in fields(Choice))}), BatchPlan "
                    f"({', '.join(f.name for f in fields(BatchPlan))}) and GenerateOptions "
                    f"({', '.join(GenerateOptions.model_fields)}; max_cost_per_op and max_tokens_per_op for each "
                    "operator's budgets)")
    choice, plan = Choice(ops=list(ops or []), **picked[Choice]), BatchPlan(**picked[BatchPlan])
    if resume is not None:
        if ops or any(picked[Choice].values()):
            raise _usage_error("--resume continues a batch with its own operators: drop --ops, --ops-file, --suite, "
                             "--family and --dataset")
        return run_batch(resolve_root(root, write=True), None, None, plan, resume=resume, given=settings,
                         report=report)
    options = _options(options, settings, batch=True)
    return run_batch(resolve_root(root, write=True), choice, options, plan, report=report)


def batch_status(batch_id: str | None = None, root: str | Path | None = None) -> dict:
    """A batch's counts and rows from its ledger (the newest batch when no id), readable while it
    runs; ``liveness`` says whether it is running, dead, stopped or finished, and ``resume`` gives
    the command that continues it where it can go on."""
    from bbagent.agent.batch.ledger import status
    return status(resolve_root(root), batch_id)


# --- listings, loading ---------------------------------------------------------------------------

def runs(root: str | Path | None = None) -> list[dict]:
    """Every run and batch under ``ROOT/runs``, oldest first (``bbagent runs --json`` rows)."""
    from bbagent.agent.reports.runs import list_runs
    return list_runs(resolve_root(root) / "runs")


def prune_runs(older_than_days: float, root: str | Path | None = None, dry_run: bool = False) -> dict:
    """Remove runs and batches older than ``older_than_days`` that nothing kept refers to and that
    are not running (``agent.reports.runs.prune``), and the working folders of bbagent processes
    that ended without removing them (``workdirs``; ``harness.workdirs``); ``dry_run`` only says
    what would go."""
    from bbagent.agent.reports.runs import prune
    from bbagent.harness.interface import remove_orphaned_workdirs
    if older_than_days < 0:
        raise _usage_error(f"--older-than takes days, 0 or more (got {older_than_days})")
    pruned = prune(resolve_root(root, write=not dry_run), older_than_days * 86400, dry_run=dry_run)
    return {**pruned, "workdirs": remove_orphaned_workdirs(dry_run=dry_run)}


def ops(suite: str = "all", pattern: str | None = None, family: str | None = None) -> list[dict]:
    """The overloads bbagent can test (``bbagent ops --json`` rows), filtered by a substring of
    the name and by prompt family."""
    from bbagent.agent.judging import listed_ops
    return listed_ops(suite, family=family, pattern=pattern)


def kernels(root: str | Path | None = None) -> list[dict]:
    """The accepted kernels under ``root``: meta.json of each, with its folder and kernel file."""
    from bbagent.agent.review.catalog import accepted
    return accepted(resolve_root(root))


def load(op: str, root: str | Path | None = None, device: str | None = None) -> Callable:
    """A callable with ``op``'s calling convention, from the accepted kernel that serves it, for
    tensors on ``device`` (default CUDA where there is a GPU, else the CPU, under Triton's
    interpreter). The kernel is imported into this process: use it for reviewed kernels."""
    from bbagent.agent.judging import check_op
    from bbagent.agent.serving.load import load as load_kernel
    check_op(op)
    return load_kernel(resolve_root(root), op, device)


def load_program(problem: str | Path, root: str | Path | None = None, device: str | None = None) -> type:
    """The ``ModelNew`` class of the accepted answer to a program problem: ``problem`` is the
    problem's file (checked to be the text the answer was accepted for) or its key
    (``kernelbench/level1/19_ReLU``). Build it with the problem's ``get_init_inputs()`` and load the
    reference's ``state_dict``, as bbagent judged it. Imported into this process: use reviewed answers."""
    from bbagent.agent.serving.load import load_program as load_answer
    return load_answer(resolve_root(root), problem, device)


def export_kernelbench(out_dir: str | Path, root: str | Path | None = None, include_unreviewed: bool = False,
                       samples: str = "accepted") -> dict:
    """Write answers to programs into ``out_dir`` as KernelBench's scripts read them
    (``level<L>/level_<L>_problem_<ID>_sample_<S>_kernel.py``) with bbagent's verdicts of them as
    its analysis reads them (``bbagent-level<L>/eval_results.json``), and ``bbagent_export.json``
    saying what each is (``agent.review.export``). ``samples``: ``accepted`` (the approved answer;
    ``include_unreviewed``: every current one not rejected) or ``first-round`` (every first-round
    answer of every run, for pass@k). Returns the files written and the answers left out, with why."""
    from bbagent.agent.review.export import SAMPLES, export_kernelbench as export
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise _usage_error(f"{out} is not a folder: pass the folder KernelBench's evaluation reads (its runs/)")
    if samples not in SAMPLES:
        raise _usage_error(f"samples is one of {', '.join(SAMPLES)} (got {samples!r})")
    return export(resolve_root(root), out, include_unreviewed=include_unreviewed, samples=samples)


def export_package(out_dir: str | Path, name: str, root: str | Path | None = None, include_unreviewed: bool = False,
                   target: str = "package") -> dict:
    """Write the approved kernels as a package ``name`` that serves them with torch and triton alone
    (``agent.review.package``): ``target`` ``package``, a project with its wheel in ``out_dir/dist``;
    ``hf-kernels``, the Hugging Face ``kernels`` library's universal build variant; ``backendbench``,
    BackendBench's DirectoryBackend layout (``name`` unused). Returns the files written and the
    kernels left out, with why."""
    from bbagent.agent.review import package
    writers = {"package": package.export_package, "hf-kernels": package.export_hf_kernels}
    out, root_path = Path(out_dir).expanduser(), resolve_root(root)
    if target == "backendbench":
        return package.export_backendbench(root_path, out, include_unreviewed)
    if target not in writers:
        raise _usage_error(f"target must be one of package, hf-kernels, backendbench (got {target!r})")
    return writers[target](root_path, out, name, include_unreviewed)


def enable(root: str | Path | None = None, *, include_unreviewed: bool = False, include_slower: bool = False,
           device: str | None = None, ops: list[str] | None = None, direct: bool = True, model: str | None = None,
           mode: str = "default"):
    """Make PyTorch run the approved kernels under ``root`` (``agent.serving.enable``): each served
    overload registered for ``device``'s dispatch key (default: ``cuda`` where a CUDA device is
    visible, else ``cpu``, where the kernels run under Triton's interpreter), aten's
    own kernel kept as the fallback. Only approved, non-stale versions (``include_unreviewed``: the
    current one unless rejected), and only overloads measured at least as fast as eager
    (``include_slower``: all). Under torch.compile on a GPU, inductor's own code launches a served
    kernel where it can (``agent.serving.direct``; ``direct=False``: every one an opaque call, as
    before). Returns an ``Enabled`` (a context manager: ``with bbagent.enable(): ...``) with
    ``calls()``, ``compiled_sites()``, ``report()`` (per overload, ``under_compile`` says which path
    it takes), ``served`` and ``skipped``. ``model`` (and torch.compile's ``mode``): serve exactly
    what the whole-model gate kept for that model (``check-model --compile MODE --gate``, recorded
    under ``runs/plans/``), each other kernel left out with the gate's reason."""
    from bbagent.agent.judging import check_served_name
    from bbagent.agent.serving.enable import enable as enable_kernels
    from bbagent.agent.serving.gate import load_plan
    from bbagent.harness.interface import default_device
    for op in ops or []:
        check_served_name(op)
    device = device or default_device()
    plan = load_plan(resolve_root(root), model, mode, device) if model is not None else None
    return enable_kernels(resolve_root(root), include_unreviewed=include_unreviewed, include_slower=include_slower,
                          device=device, ops=ops, direct=direct, plan=plan)


def disable() -> dict | None:
    """Give aten its kernels back; returns the calls served per overload (None if none was enabled)."""
    from bbagent.agent.serving.enable import disable as disable_kernels
    return disable_kernels()


def check_model(model: str | None = None, *, script: str | Path | None = None, root: str | Path | None = None,
                device: str | None = None, config: dict | None = None, ops: list[str] | None = None,
                timeout_s: float = 1800.0, **settings) -> dict:
    """Run ``model`` (``agent.models``), or ``script`` (your model as a program file in
    KernelBench's format), forward with the enabled kernels and eagerly, in a child process;
    returns the comparison, the overloads served with their call counts, the timing and, on a
    mismatch, the culprit overloads. ``settings``: dtype, include_unreviewed, include_slower, atol,
    rtol, repeats, iterations, seed, compile and mode (torch.compile alone and with the kernels),
    train and steps (training steps instead of forwards; compiled) (``agent.serving.check_model.ModelCheck``)."""
    from bbagent.agent.judging import check_served_name
    from bbagent.agent.serving.check_model import ModelCheck, checked, run_check
    for op in ops or []:
        check_served_name(op)
    allowed = [name for name in ModelCheck.__dataclass_fields__
               if name not in ("model", "config", "device", "ops", "root", "script")]
    _refuse_unknown("check_model", settings, allowed,
                    f"{', '.join(allowed)}, script, root, device, config, ops, timeout_s")
    return run_check(checked(model, config, device, script, ops=ops, root=str(resolve_root(root)), **settings),
                     timeout_s)


def regions(model: str | None = None, *, script: str | Path | None = None, root: str | Path | None = None,
            device: str | None = None, config: dict | None = None, dtype: str = "float32",
            out: str | Path | None = None, backward: bool = False):
    """The candidate regions (``agent.regions``) of ``model`` (``agent.models``, built from
    ``config``) or of ``script``, a program file in KernelBench's format: compiled once by
    torch.compile, the graphs inductor receives searched for a matrix product or a reduction with
    the pointwise work around it, each region hashed, counted and written as a program problem under
    ``out`` (default ``runs/regions-<name>-<time>``), on a GPU its share of the model's time
    measured. ``backward``: the training graphs instead, forward and backward (no shares).
    Returns an ``agent.regions.survey.RegionSurvey``."""
    from bbagent.agent.regions.survey import survey
    from bbagent.agent.models import config_for
    from bbagent.agent.storage import new_run_id
    from bbagent.harness.interface import default_device
    if dtype not in ("float32", "float16", "bfloat16"):
        raise _usage_error(f"dtype must be float32, float16 or bfloat16 (got {dtype!r})")
    if (model is None) == (script is None):
        raise _usage_error("give a model (--model) or a program file (--script), one of them")
    if script is not None:
        if config:
            raise _usage_error("--set applies to a built-in --model, not to a --script (its sizes are in its code)")
        script = Path(script).expanduser().absolute()
        name, settings = script.stem, {}
    else:
        assert model is not None, "one of model and script, checked above"
        try:
            name, settings = model, config_for(model, config)
        except ValueError as exc:
            raise _usage_error(str(exc)) from None
    where = (Path(out).expanduser().absolute() if out is not None
             else resolve_root(root, write=True) / "runs" / new_run_id(f"regions-{name}"))
    return survey(name, settings, device or default_device(), dtype, where, script=script, backward=backward)


def report(ident: str | None = None, *, root: str | Path | None = None, out: str | Path | None = None) -> Path:
    """Write the HTML report of a batch (default: the newest) or a run (``agent.reports.html``);
    returns its path (default ``runs/<id>/report.html``)."""
    from bbagent.agent.reports.html import write_report
    return write_report(resolve_root(root, write=out is None), ident, Path(out) if out is not None else None)


def verdict_schema() -> dict:
    """The JSON schema of the Verdict (``bbagent schema verdict``)."""
    from bbagent.harness.interface import Verdict
    return Verdict.model_json_schema()


# --- review ----------------------------------------------------------------------------------------

def review_list(root: str | Path | None = None, *, status: str | None = None, family: str | None = None,
                sort: str = "op") -> list[dict]:
    """One row per operator with an accepted kernel (``bbagent review list --json``): version, review
    status (``stale`` where the environment changed since its tests), tests, speedup, cost, flags."""
    from bbagent.agent.review.catalog import listing
    return listing(resolve_root(root), status=status, family=family, sort=sort)


def review_show(op: str, root: str | Path | None = None, version: int | None = None) -> dict:
    """Everything a reviewer reads about one version of ``op``'s kernel (default: the current one)."""
    from bbagent.agent.review.catalog import shown
    return shown(resolve_root(root), op, version)


def review_decide(op: str, decision: str, note: str = "", *, root: str | Path | None = None,
                  version: int | None = None, device: str | None = None, timeout_s: float | None = None,
                  on_judge: Callable[[str, int, str], None] | None = None) -> dict:
    """``approve`` or ``reject`` one version of ``op``'s kernel; returns its new review record. An
    approval covers what was judged: a kernel.py changed since its tests is judged first here
    (``on_judge(op, version, why)`` hears it start; ``device`` and ``timeout_s`` as for ``evaluate``)
    and approved as a new version only if it passes; where it fails nothing is approved and the
    record's ``refused`` says why."""
    from bbagent.agent.review.catalog import decide
    if decision not in ("approve", "reject"):
        raise _usage_error(f"a review decision is approve or reject (got {decision!r})")
    status = {"approve": "approved", "reject": "rejected"}[decision]
    where = resolve_root(root, write=True)
    chosen = decide(where, op, status, note, version, judge=_stored_judge(where, device, timeout_s or 600.0),
                    judging=lambda v, why: on_judge(v.meta.op, v.number, why) if on_judge else None)
    judged = chosen.judged
    return {"op": op, "version": chosen.version.number, **chosen.version.meta.review.model_dump(exclude={"history"}),
            "refused": chosen.refused,
            "judged": None if judged is None else f"{judged.summary.passed}/{judged.summary.total} tests passed"}


def _stored_judge(root: Path, device: str | None, timeout_s: float, allow_no_opinfo: bool = False) -> Callable:
    """``judge(KernelVersion) -> Verdict``: a stored kernel tested again here as it is served (its
    program answered), timed where there is a GPU, as ``review verify`` and an approval of an edited
    kernel.py judge it."""
    def judge(version):
        from bbagent.agent.judging import Evaluations, check_evaluation, stored_request, timing_options
        from bbagent.harness.interface import default_device
        check_evaluation(device, timeout_s, allow_no_opinfo)
        timing = (timing_options(root, max_shapes=64, target_ms=100.0, no_cache=False)
                  if (device or default_device()) == "cuda" else None)
        return Evaluations(stored_request(version, root, device=device, timeout_s=timeout_s,
                                          timing=timing)).evaluate(version.kernel)
    return judge


def review_diff(op: str, root: str | Path | None = None, version: int | None = None,
                against: int | None = None) -> str:
    """A unified diff of ``op``'s kernel (default: current) against the version before it."""
    from bbagent.agent.review.catalog import diff
    return diff(resolve_root(root), op, version, against)


def review_verify(op: str | None = None, *, root: str | Path | None = None, force: bool = False,
                  device: str | None = None, timeout_s: float = 600.0, allow_no_opinfo: bool = False,
                  on_start: Callable[[str, int], None] | None = None) -> list[dict]:
    """Re-test every stale approved kernel (of ``op``, or of all), timed where there is a GPU, and
    every current kernel.py changed since its tests; ``force`` re-tests every approved one. Returns
    one outcome per version tested."""
    from bbagent.agent.judging import check_evaluation
    from bbagent.agent.review.verify import stale_versions, verify
    check_evaluation(device, timeout_s, allow_no_opinfo)
    where = resolve_root(root, write=True)
    judge = _stored_judge(where, device, timeout_s, allow_no_opinfo)
    results = []
    for name, kernel_version in stale_versions(where, op, force):
        if on_start is not None:
            on_start(name, kernel_version.number)
        results.append(verify(where, kernel_version, judge))
    return results
