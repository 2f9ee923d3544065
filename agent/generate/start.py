"""One ``generate`` from its options: the checks this machine needs, the provider behind the call
log, the run directory and the evaluator, then the loop (``agent.generate.loop.Agent``).

``bbagent.generate`` calls it for one operator; a batch calls it for each of its operators with
its executor (where evaluations run), its shared rate limiter and a dataset's inputs.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from bbagent.agent.errors import UsageError
from bbagent.agent.judging import Evaluations, check_evaluation, evaluation_request, this_machine, timing_options
from bbagent.agent.generate.loop import Agent, Outcome
from bbagent.agent.generate.progress import DeviceProbed, ProbingDevice, Retrying, Started, listener
from bbagent.agent.generate.spending import Spent
from bbagent.agent.generate.posed import Posed, posed_operator
from bbagent.agent.options import GenerateOptions
from bbagent.agent.storage import RunDir, new_run_id, resolve_root

if TYPE_CHECKING:
    from bbagent.harness.interface import Evaluator


def require_price(model: str | None) -> None:
    """A cost budget needs the model's price (a run's ``--max-cost-usd`` or a batch's)."""
    from bbagent.agent.providers.prices import price_of, where_prices_go
    if model is None or price_of(model) is None:
        raise UsageError(f"--max-cost-usd needs a price for model '{model}': {where_prices_go()}, or drop "
                         "--max-cost-usd")


def run_generate(op: str | Posed, options: GenerateOptions, root: str | Path | None, *,
                 report: Callable | None = None, executor: Evaluator | None = None,
                 limiter=None, extra_traces: dict | None = None, batch_id: str | None = None,
                 resumed: bool = False, halt: Callable[[], str | None] | None = None,
                 spent: Spent | None = None) -> Outcome:
    """Ask for a kernel for ``op`` (an operator's name, or a problem resolved already: an operator a
    batch resolved, or a program, whose answer is a ``ModelNew``) as
    ``options`` say, under ``root`` (``agent.storage.resolve_root``;
    created once the checks passed), and return the run's Outcome. ``report(event)`` hears the
    progress, one ``agent.generate.progress`` event at a time (a two-argument ``report(name, data)``
    gets each one's name and fields). A batch's run names its ``batch_id``; in a ``resumed``
    batch, requests its batch already paid for are answered from the call log; ``halt()``, asked
    between rounds, says why no further round may start (a batch's spent budget), or None; ``spent``
    is counted into as each answer comes (a batch's view of the run's spend so far)."""
    from bbagent.agent.providers import RetryPolicy, make_provider
    from bbagent.agent.providers.call_log import FILE_NAME, LLMLog
    from bbagent.agent.providers.logged import LoggedProvider
    operator = posed_operator(op, options.exact_overload) if isinstance(op, str) else op
    computation, serves = operator.key, list(operator.serves)
    check_evaluation(options.device, options.timeout_s, options.allow_no_opinfo or not operator.needs_opinfo)
    channels_last = operator.channels_last(options.channels_last)
    root = resolve_root(root, write=True)
    untimed = evaluation_request(operator.problem, root, device=options.device, seed=options.seed,
                                 timeout_s=options.timeout_s, extra_traces=extra_traces,
                                 allow_library=options.allow_library, facts=operator.facts)
    operator.refuse_untestable(Evaluations(untimed, executor or this_machine()), extra_traces)
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
    inner.limiter = limiter
    from bbagent.agent.providers.prices import price_of
    price_of(inner.model)  # a bad prices file of the user's is said now (exit 2), before any call
    if options.max_cost_usd is not None:
        require_price(inner.model)
    run = RunDir(root, new_run_id(computation))
    reuse = "any" if options.cache else "batch" if resumed else None
    logged = LoggedProvider(inner, log, run_id=run.path.name, op=computation, reuse=reuse, batch_id=batch_id,
                            params={"max_output_tokens": options.max_output_tokens,
                                    "temperature": options.temperature})
    report(Started(op=operator.requested, computation=computation, serves=serves, provider=logged.name, model=logged.model,
                   rounds=options.rounds, candidates=options.candidates, run_dir=str(run.path)))
    probe_the_gpu(options.device, report)
    request = dataclasses.replace(untimed, timing=timing, channels_last=channels_last)
    agent = Agent(operator=operator, provider=logged, evaluations=Evaluations(request, executor or this_machine()), run=run, root=root,
                  options=options.model_copy(update={"channels_last": channels_last,
                                                     "baseline": ",".join(timing.baselines)}),
                  report=report, halt=halt, spent=spent if spent is not None else Spent(), batch_id=batch_id)
    return agent.generate()


def probe_the_gpu(device: str | None, report) -> None:
    """Probe the GPU for the first prompt's section on it (``agent.gpu_facts``), telling the listener,
    unless it was probed before (cached) or there is none."""
    from bbagent.agent.gpu_facts import facts_for, probe_failure
    if device != "cuda" or facts_for(device, probe=False) is not None or probe_failure(device):
        return
    started = time.monotonic()
    report(ProbingDevice())
    facts = facts_for(device)
    report(DeviceProbed(gpu=facts.gpu.name if facts is not None and facts.gpu is not None else None, seconds=round(time.monotonic() - started, 1),
                        failure=probe_failure(device)))
