"""Starting a batch and resuming one: the checks made before anything runs, the executor, the
ledger's first rows (or, on ``--resume``, the operators to run again), and each operator's
``generate`` bound to the batch's options, executor and rate limiter.

The batch's ``GenerateOptions`` are stored in its ledger; ``--resume`` runs with them, and refuses
options given again that differ. A result is tied to its resume key (prompt templates, provider
and model, this machine: ``agent.machine``); a resume under another key runs it again.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bbagent.agent.batch import selection as select
from bbagent.agent.batch.events import CoordinatorLost, DatasetChosen, Resumed, RunsInterrupted, WorkdirsRemoved
from bbagent.agent.batch.executor import LocalExecutor
from bbagent.agent.batch.ledger import FILE_NAME, Ledger, liveness
from bbagent.agent.batch.ray_executor import RayExecutor, import_ray
from bbagent.agent.batch.runner import Batch, BatchResult, Budgets, coordinator_state, new_batch_id
from bbagent.agent.errors import UsageError
from bbagent.agent.families import PROMPTS_DIR
from bbagent.agent.generate.progress import DatasetInputs
from bbagent.agent.generate.start import InBatch, pose, probe_the_gpu, require_price, run_generate
from bbagent.agent.judging import check_evaluation, check_tuning, family_of_overload, listed_ops
from bbagent.agent.machine import this_machine
from bbagent.agent.options import GenerateOptions, positive
from bbagent.agent.providers import RetryPolicy, make_provider
from bbagent.agent.providers.limiter import RateLimiter
from bbagent.agent.review.catalog import accepted
from bbagent.agent.run_record import interrupt_lost_runs
from bbagent.harness.interface import default_device, remove_orphaned_workdirs


@dataclass
class Choice:
    """Which operators a batch runs: ``ops`` and ``ops_file`` (one exact overload per line, ``#``
    comments), or a ``suite`` and/or prompt ``family``, or a BackendBench-format ``dataset``; or
    which programs: a ``kernelbench`` checkout's problems, of ``level`` and numbered ``problems``."""
    ops: list[str] = field(default_factory=list)
    ops_file: str | Path | None = None
    suite: str | None = None
    family: str | None = None
    dataset: str | Path | None = None
    include_synthetic: bool = False
    kernelbench: str | Path | None = None  # a KernelBench checkout: its problems, not operators
    level: str | None = None  # with kernelbench: "1,2"
    problems: str | None = None  # with kernelbench: "1-20,25"


@dataclass
class BatchPlan:
    """How a batch runs, beside each operator's ``GenerateOptions``."""
    jobs: int | None = None  # agent loops at once (default twice the evaluation slots, at least 4)
    gpus: list[int] | None = None
    evals_per_gpu: int | None = None  # evaluations sharing one GPU (default agent.batch.shared_gpu.evaluations_per_gpu)
    llm_concurrency: int = 8
    force: bool = False
    retry_failed: bool = False  # with --resume: the failed operators run again
    lease_s: float = 120.0
    max_cost_usd: float | None = None  # the batch's budgets
    max_tokens: int | None = None
    deadline: str | None = None  # "HH:MM", the next such local time
    infra_pause_s: tuple[float, float] | None = None
    executor: str = "local"
    ray_address: str | None = None
    ray_resource: str = "GPU"
    # with executor "ray": the device memory each GPU (or unit of a custom resource) admits evaluations
    # against, instead of what its driver reports (none on the CPU); the Python API's, for a simulated GPU
    ray_device_memory_gib: float | None = None


def choose_ops(choice: Choice, exact_overload: bool = False) -> select.Selection:
    """The operators of ``choice`` (one per variant family unless ``exact_overload``); every name
    is checked before anything starts."""
    sources = [name for name, given in (("--ops/--ops-file", choice.ops or choice.ops_file),
                                        ("--suite/--family", choice.suite or choice.family),
                                        ("--dataset", choice.dataset), ("--kernelbench", choice.kernelbench))
               if given]
    if len(sources) > 1:
        raise UsageError(f"choose the operators one way: {' or '.join(sources)}")
    if (choice.level or choice.problems) and not choice.kernelbench:
        raise UsageError("--level and --problems choose among the problems of --kernelbench DIR")
    if choice.kernelbench:
        return select.by_kernelbench(choice.kernelbench, choice.level, choice.problems)
    if choice.include_synthetic and not choice.dataset:
        raise UsageError("--include-synthetic applies to --dataset")
    if choice.dataset:
        chosen = select.by_dataset(select.read_dataset(choice.dataset), choice.include_synthetic)
    elif choice.suite or choice.family:
        chosen = select.by_suite(choice.suite or "all", choice.family, listed_ops(choice.suite or "all", choice.family))
    else:
        chosen = select.by_name(list(choice.ops or []) + (select.read_ops_file(choice.ops_file)
                                                          if choice.ops_file else []))
    if not chosen.ops and not chosen.skipped:
        raise UsageError("no operators: pass --ops aten.relu.default,aten.add.Tensor, --ops-file FILE, --suite, "
                         "--family or --dataset")
    return chosen if exact_overload else select.one_per_family(chosen, family_of_overload)


def prompts_hash() -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(Path(PROMPTS_DIR).rglob("*.j2")))).hexdigest()[:16]


def resume_key(options: GenerateOptions, gpu: str) -> dict:
    """What an operator's result depends on beyond the operator: the prompt templates, the provider
    and model, torch, triton and the GPU model(s) the batch's executor evaluates on ("cpu")."""
    machine = this_machine()
    return {"prompts": prompts_hash(), "provider": options.provider, "model": options.model,
            "torch": machine.torch, "triton": machine.triton, "gpu": gpu}


def next_time_of_day(text: str) -> float:
    """The next local time "HH:MM" (today if still ahead, else tomorrow), as time.time() counts."""
    try:
        at = datetime.datetime.strptime(text.strip(), "%H:%M").time()
    except ValueError:
        raise UsageError(f"--deadline takes a local time HH:MM, e.g. 08:30 (got '{text}')") from None
    now = datetime.datetime.now()
    moment = datetime.datetime.combine(now.date(), at)
    if moment <= now:
        moment += datetime.timedelta(days=1)
    return moment.timestamp()


def check_plan(plan: BatchPlan) -> Budgets:
    positive("--jobs", plan.jobs, minimum=1)
    positive("--evals-per-gpu", plan.evals_per_gpu, minimum=1)
    positive("--llm-concurrency", plan.llm_concurrency, minimum=1)
    positive("--lease", plan.lease_s)
    positive("--max-cost-usd", plan.max_cost_usd)
    positive("--max-tokens", plan.max_tokens)
    if plan.executor not in ("local", "ray"):
        raise UsageError(f"--executor must be 'local' or 'ray' (got {plan.executor!r})")
    if plan.executor == "local" and (plan.ray_address or plan.ray_resource != "GPU"):
        raise UsageError("--ray-address and --ray-resource go with --executor ray")
    if plan.executor == "ray" and plan.gpus:
        raise UsageError("--gpus picks GPUs of this machine; --executor ray uses every GPU of the cluster")
    if plan.executor == "local" and plan.ray_device_memory_gib is not None:
        raise UsageError("ray_device_memory_gib goes with executor='ray'")
    if plan.ray_device_memory_gib is not None and not plan.ray_device_memory_gib > 0:
        raise UsageError(f"ray_device_memory_gib must be more than 0 (got {plan.ray_device_memory_gib})")
    return Budgets(plan.max_cost_usd, plan.max_tokens, next_time_of_day(plan.deadline) if plan.deadline else None)


def check_provider(options: GenerateOptions) -> None:
    """A batch's provider can be set up (its key is there) before any operator starts: raises
    ProviderError naming the fix. A replay is checked per operator (each has its own answers)."""
    if options.provider != "replay":
        make_provider(options.provider, op="", model=options.model, base_url=options.base_url, retry=RetryPolicy())


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


def make_executor(plan: BatchPlan, options: GenerateOptions):
    """Where the batch's evaluations run: this machine's GPUs (or CPU workers), or a Ray cluster's.
    With Ray the device defaults to ``cuda`` for the GPU resource and to ``cpu`` for a custom one;
    this machine (the driver) needs no GPU of its own, so CUDA is not checked here. OpInfo is, as
    the supervisors run the same bbagent."""
    if plan.executor == "ray":
        import_ray()
        if not plan.ray_resource or not plan.ray_resource.strip():
            raise UsageError("--ray-resource needs a resource name (GPU, or a custom one the nodes declare)")
        device = options.device or ("cuda" if plan.ray_resource == "GPU" else "cpu")
        check_evaluation(None if device == "cuda" else device, options.timeout_s, options.allow_no_opinfo, options.dsl)
        memory = plan.ray_device_memory_gib
        return RayExecutor(device, address=plan.ray_address, resource=plan.ray_resource, at_once=plan.evals_per_gpu,
                           device_memory=None if memory is None else int(memory * 2**30))
    check_evaluation(options.device, options.timeout_s, options.allow_no_opinfo, options.dsl)
    device = options.device or default_device()
    check_tuning(options.autotune_budget, device)
    if device == "cpu" and plan.evals_per_gpu:
        raise UsageError("--evals-per-gpu shares a GPU; this batch evaluates on the CPU (one evaluation per core)")
    return LocalExecutor(device, gpus=check_gpus(plan.gpus, device), per_gpu=plan.evals_per_gpu)


def resumed_options(ledger: Ledger, given: dict) -> GenerateOptions:
    """The options a batch was started with; ``given`` (the options set for the resume, None for
    unset) must agree with them."""
    own = GenerateOptions.model_validate(ledger.meta()["generate_options"])
    differing = own.differing(given)
    if differing:
        raise UsageError("--resume continues a batch with its own options: drop " + ", ".join(differing))
    return own


def start_batch(root: Path, choice: Choice, options: GenerateOptions, plan: BatchPlan, runner_options: dict,
                key: dict) -> Batch:
    """A new batch directory with its ledger: the operators chosen, those skipped and why."""
    chosen = choose_ops(choice, exact_overload=options.exact_overload)
    # a kernel modified since its approval serves nothing: its operators are generated again
    served = {op for entry in accepted(root) if entry["status"] != "modified" for op in entry["serves"]}
    skipped = dict(chosen.skipped)
    if not plan.force:
        skipped.update({op: "an accepted kernel serves it already (--force to redo)" for op in chosen.ops if op in served})
    path = root / "runs" / new_batch_id()
    path.mkdir(parents=True)
    runner = Batch(path, **runner_options)
    runner.ledger.key = key
    runner.ledger.set_meta(generate_options=options.model_dump(), created_at=time.time(), jobs=runner.jobs,
                           resume_key=key, extra_traces=chosen.extra_traces, programs=chosen.programs,
                           selection={"ops": choice.ops, "ops_file": _text(choice.ops_file), "suite": choice.suite,
                                      "family": choice.family, "dataset": _text(choice.dataset),
                                      "include_synthetic": choice.include_synthetic,
                                      "kernelbench": _text(choice.kernelbench), "level": choice.level,
                                      "problems": choice.problems})
    runner.ledger.add(chosen.ops + [op for op in skipped if op not in chosen.ops], skipped)
    if chosen.dataset is not None:
        (path / "dataset.json").write_text(json.dumps(chosen.dataset, indent=1) + "\n")
        reasons = Counter(pair["why"] for pair in chosen.dataset["skipped_pairs"])
        runner.event(DatasetChosen(**{k: v for k, v in chosen.dataset.items() if k != "skipped_pairs"},
                                   skipped=len(chosen.dataset["skipped_pairs"]), reasons=dict(reasons.most_common()),
                                   file=str(path / "dataset.json")))
    return runner


def _text(path) -> str | None:
    return str(path) if path else None


def reopen_batch(path: Path, ledger: Ledger, runner_options: dict, key: dict, retry_failed: bool = False) -> Batch | None:
    """A batch to continue: refused while its coordinator lives; its unfinished operators (and with
    ``retry_failed`` its failed ones) pending again. A coordinator found dead is recorded (its
    session ends as lost, and ``events.jsonl`` says so). None, with nothing written, when there is
    nothing to do."""
    meta = ledger.meta()
    state = coordinator_state(meta)
    if state == "alive":
        pid = meta["coordinator"]["pid"]
        raise UsageError(f"batch {path.name} is still running (process {pid} on this host): wait for it, or stop "
                         f"it (Ctrl-C, or kill {pid}) and resume then")
    dead = state == "dead"
    todo = ledger.reopen(key, coordinator_dead=dead, retry_failed=retry_failed, dry_run=True)
    if not any(ops for kind, ops in todo.items() if kind != "still_leased") and not ledger.counts()["pending"]:
        return None
    runner = Batch(path, **{**runner_options, "jobs": runner_options.get("jobs") or meta.get("jobs") or 4})
    alive = liveness(meta, ledger.counts())
    if alive["state"] == "dead":
        sessions = meta.get("sessions") or [{}]
        heartbeat = meta.get("heartbeat") or time.time()
        began = sessions[-1].get("started_at") or 0.0
        # finished in that session: since it began (nothing has run since it was lost; an operator can
        # finish after its last heartbeat, before the process died)
        finished = sum(1 for row in ledger.rows() if row["state"] in ("accepted", "failed")
                       and began <= (row.get("updated_at") or 0.0))
        sessions[-1].update(ended_at=heartbeat, ended=f"lost: {alive['reason']}", finished_ops=finished)
        ledger.set_meta(sessions=sessions)
        runner.event(CoordinatorLost(coordinator=meta.get("coordinator"), last_heartbeat=heartbeat, reason=alive["reason"],
                                     running=[r["op"] for r in ledger.rows() if r["state"] == "running"]))
    runner.event(Resumed(**runner.ledger.reopen(key, coordinator_dead=dead, retry_failed=retry_failed)))
    lost = interrupt_lost_runs(path.parent, path.name, since=meta.get("created_at") or 0.0)
    if lost:
        runner.event(RunsInterrupted(runs=lost))
    left = remove_orphaned_workdirs()  # a killed coordinator's candidates' folders, among others
    if left["folders"]:
        runner.event(WorkdirsRemoved(folders=left["folders"], bytes=left["bytes"]))
    return runner


def run_batch(root: Path, choice: Choice | None, options: GenerateOptions | None, plan: BatchPlan, *,
              resume: str | None = None, given: dict | None = None, report: Callable | None = None) -> BatchResult:
    """Start a batch of ``choice`` with ``options`` (or, with ``resume``, continue the batch of that
    id with its own; ``given``: the options set for the resume, to be refused where they differ)
    and run it to its end. ``root`` exists and is writable."""
    budgets = check_plan(plan)
    if plan.retry_failed and resume is None:
        raise UsageError("--retry-failed goes with --resume BATCH_ID")
    if resume is not None:
        path = root / "runs" / resume
        if not (path / FILE_NAME).is_file():
            raise UsageError(f"no batch '{resume}' under {root / 'runs'} (see `bbagent status`)")
        ledger = Ledger(path / FILE_NAME)
        options = resumed_options(ledger, given or {})
    if options is None:  # a new batch is given its options; a resumed one reads them from its ledger
        raise UsageError("a batch needs its options, or --resume BATCH_ID")
    check_provider(options)
    if plan.max_cost_usd is not None and options.provider != "replay":
        require_price(options.model)
    evaluations = make_executor(plan, options)
    try:  # a cluster's supervisors hold GPUs: let them go however the batch ends
        options = options.model_copy(update={"device": evaluations.device})
        key = resume_key(options, evaluations.gpu_label())
        jobs = plan.jobs or (None if resume is not None else max(4, 2 * len(evaluations.slots)))  # a resume: its own
        runner_options = dict(jobs=jobs, report=report,
                              lease_s=plan.lease_s, budgets=budgets, executor=evaluations,
                              limiter=RateLimiter(plan.llm_concurrency),
                              **({"pause_s": plan.infra_pause_s} if plan.infra_pause_s else {}))
        runner = (reopen_batch(path, ledger, runner_options, key, plan.retry_failed) if resume is not None
                  else start_batch(root, choice or Choice(), options, plan, runner_options, key))
        if runner is None:  # a resume with nothing left to do changes nothing
            return BatchResult(path.name, path, ledger.counts(), nothing_to_do=True)
        extra = runner.ledger.meta().get("extra_traces") or {}
        programs = runner.ledger.meta().get("programs") or {}

        def generate_one(op: str, hear):
            # a KernelBench problem: its file as chosen; else an operator's name
            posed = pose(Path(programs[op]) if op in programs else op, options.exact_overload)
            mine = {name: extra[name] for name in dict.fromkeys([op, *posed.serves]) if name in extra}
            layout = posed.channels_last(options.channels_last, quiet=True)
            outcome = run_generate(posed, options.model_copy(update={"channels_last": layout}), root, report=hear,
                                   batch=InBatch(runner.path.name, evaluations, runner.limiter, runner.stop_signal,
                                                 runner.spending(op), extra_traces=mine or None,
                                                 resumed=resume is not None))
            used = select.dataset_inputs_run(outcome.run_dir) if mine and outcome.run_dir is not None else None
            if used is not None:  # which of the user's inputs ran, and why the others did not
                hear(DatasetInputs(**used))
            return outcome
        runner.generate = generate_one
        probe_the_gpu(options.device, runner.event)  # once, before the workers ask for their first prompts
        return runner.run()
    finally:
        evaluations.close()
