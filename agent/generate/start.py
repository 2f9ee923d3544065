"""One ``generate`` from its options: the checks this machine needs, the provider behind the call
log, the run directory and the evaluator, then the loop (``agent.generate.loop.Agent``).

``bbagent.generate`` calls it for one operator; a batch calls it for each of its operators with
its executor (where evaluations run), its shared rate limiter and a dataset's inputs.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from bbagent.agent.errors import ProviderError, UsageError
from bbagent.agent.generate.loop import Agent, Outcome, ending_of
from bbagent.agent.generate.posed import Posed, posed_operator, posed_program
from bbagent.agent.generate.progress import DeviceProbed, ProbingDevice, Retrying, Started, listener
from bbagent.agent.generate.spending import Spent
from bbagent.agent.generate.stopping import StopSignal
from bbagent.agent.gpu_facts import facts_for, probe_failure
from bbagent.agent.judging import Evaluations, check_evaluation, check_tuning, evaluation_request, this_machine, timing_options
from bbagent.agent.options import GenerateOptions
from bbagent.agent.providers import RetryPolicy, make_provider
from bbagent.agent.providers.call_log import FILE_NAME, LLMLog
from bbagent.agent.providers.logged import LoggedProvider
from bbagent.agent.providers.prices import price_of, where_prices_go
from bbagent.agent.run_record import Halt, StoppedBecause
from bbagent.agent.storage import RunDir, new_run_id, resolve_root

if TYPE_CHECKING:
    from bbagent.agent.providers.limiter import RateLimiter
    from bbagent.harness.interface import Evaluator


def require_price(model: str | None) -> None:
    """A cost budget needs the model's price (a run's ``--max-cost-usd`` or a batch's)."""
    if model is None or price_of(model) is None:
        raise UsageError(f"--max-cost-usd needs a price for model '{model}': {where_prices_go()}, or drop "
                         "--max-cost-usd")


@dataclass
class InBatch:
    """What a batch gives each of its runs: its id (named in run.json), where evaluations run, the
    shared rate limiter, the stop signal the run reads (the batch's Ctrl-C and budget), the spend
    the run counts into as each answer comes (the batch's view of it so far), the user's dataset
    inputs for the operator, and whether the batch is resumed (requests it already paid for are
    answered from the call log). A run alone has the defaults: no batch, this machine, a stop signal
    nothing sets, its own spend."""
    batch_id: str | None = None
    executor: Evaluator = field(default_factory=this_machine)
    limiter: RateLimiter | None = None
    stop: StopSignal = field(default_factory=StopSignal)
    spent: Spent = field(default_factory=Spent)
    extra_traces: dict | None = None
    resumed: bool = False


def run_generate(op: str | Path | Posed, options: GenerateOptions, root: str | Path | None, *,
                 report: Callable | None = None, batch: InBatch | None = None) -> Outcome:
    """Ask for a kernel for ``op`` (an operator's name, a program's file, whose answer is a
    ``ModelNew``, or a problem posed already, as a batch poses its operators) as
    ``options`` say, under ``root`` (``agent.storage.resolve_root``;
    created once the checks passed), and return the run's Outcome, however it ended: a run refused
    before it began (input it cannot take, a provider it cannot set up, Ctrl-C) is one too, with no
    run directory. ``report(event)`` hears the
    progress, one ``agent.generate.progress`` event at a time (a two-argument ``report(name, data)``
    gets each one's name and fields). A run of a ``batch`` takes what the batch gives it."""
    try:
        agent = set_up(op, options, root, report, batch)
    except ProviderError as exc:  # a provider that cannot be used at all (no key, a bad model): nothing started
        return Outcome.not_started(_name_of(op), Halt(StoppedBecause.SETUP, str(exc), status="error"))
    except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - bad input, Ctrl-C, a bug: nothing started
        return Outcome.not_started(_name_of(op), ending_of(exc))
    return agent.generate()


def _name_of(op: str | Path | Posed) -> str:
    return str(op) if isinstance(op, (str, Path)) else op.key


def pose(op: str | Path | Posed, exact_overload: bool) -> Posed:
    """The problem ``op`` names: an operator by its name, a program by its file."""
    if isinstance(op, Path):
        return posed_program(op)
    return posed_operator(op, exact_overload) if isinstance(op, str) else op


def set_up(op: str | Path | Posed, options: GenerateOptions, root: str | Path | None, report: Callable | None,
           batch: InBatch | None) -> Agent:
    """The checks this machine needs, the provider behind the call log, the run directory and the
    evaluator: the loop of ``run_generate``, ready to start. Raises what refuses the run."""
    batch = batch if batch is not None else InBatch()
    extra_traces = batch.extra_traces
    operator = pose(op, options.exact_overload)
    computation, serves = operator.key, list(operator.serves)
    check_evaluation(options.device, options.timeout_s, options.allow_no_opinfo or not operator.needs_opinfo, options.dsl)
    check_tuning(options.autotune_budget, options.device, program=operator.answers_program is not None)
    channels_last = operator.channels_last(options.channels_last)
    root = resolve_root(root, write=True)
    untimed = evaluation_request(operator.problem, root, device=options.device, seed=options.seed,
                                 timeout_s=options.timeout_s, extra_traces=extra_traces,
                                 allow_library=options.allow_library, facts=operator.facts, dsl=options.dsl)
    operator.refuse_untestable(Evaluations(untimed, batch.executor), extra_traces)
    timing = timing_options(root, max_shapes=options.max_shapes, target_ms=options.target_ms,
                            no_cache=options.no_cache, inductor_mode=options.inductor_mode,
                            # the rounds always see the problem's own bar (a program's is torch.compile)
                            engines=tuple(dict.fromkeys(options.engines + (operator.problem.default_baseline,))),
                            profile_feedback=options.profile_feedback,
                            feedback_by_ncu=operator.problem.ncu_refused is None)
    report = listener(report)
    log = LLMLog(root / "runs" / FILE_NAME)
    inner = make_provider(options.provider, op=computation, model=options.model, base_url=options.base_url,
                          replay=options.replay, max_output_tokens=options.max_output_tokens,
                          temperature=options.temperature, retry=RetryPolicy(attempts=options.retries), log=log,
                          root=root)
    inner.on_retry = lambda info: report(Retrying(**info))
    inner.limiter = batch.limiter
    price_of(inner.model)  # a bad prices file of the user's is said now (exit 2), before any call
    if options.max_cost_usd is not None:
        require_price(inner.model)
    run = RunDir(root, new_run_id(computation))
    reuse = "any" if options.cache else "batch" if batch.resumed else None
    logged = LoggedProvider(inner, log, run_id=run.path.name, op=computation, reuse=reuse, batch_id=batch.batch_id,
                            params={"max_output_tokens": options.max_output_tokens,
                                    "temperature": options.temperature})
    report(Started(op=operator.requested, computation=computation, serves=serves, provider=logged.name, model=logged.model,
                   rounds=options.rounds, candidates=options.candidates, run_dir=str(run.path),
                   variant_of=operator.variant_of))
    probe_the_gpu(options.device, report)
    request = dataclasses.replace(untimed, timing=timing, channels_last=channels_last)
    return Agent(operator=operator, provider=logged, evaluations=Evaluations(request, batch.executor), run=run,
                 root=root, options=options.model_copy(update={"channels_last": channels_last,
                                                               "baseline": ",".join(timing.baselines)}),
                 report=report, stop=batch.stop, spent=batch.spent, batch_id=batch.batch_id)


def probe_the_gpu(device: str | None, report) -> None:
    """Probe the GPU for the first prompt's section on it (``agent.gpu_facts``), telling the listener,
    unless it was probed before (cached) or there is none."""
    if device != "cuda" or facts_for(device, probe=False) is not None or probe_failure(device):
        return
    started = time.monotonic()
    report(ProbingDevice())
    facts = facts_for(device)
    report(DeviceProbed(gpu=facts.gpu.name if facts is not None and facts.gpu is not None else None, seconds=round(time.monotonic() - started, 1),
                        failure=probe_failure(device)))
