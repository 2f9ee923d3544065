"""``bbagent check-model --compile``, in the child: the model compiled by ``torch.compile`` alone
and compiled again with ``bbagent.enable()`` on (``agent.serving.compiled``: approved operators
and region answers swapped into the graphs inductor receives), each compared with eager and timed.

Two wrapper functions of the model are compiled (``torch.compile`` keeps its code per function,
so the wrapper compiled while the kernels are on keeps them and the other never sees them). The
compiled code with the kernels can run only while they are enabled, and eager and the plain
compiled code must not run while they are (aten calls would reach the kernels), so the timing is
bracketed: eager and torch.compile alone, then torch.compile with the kernels, then eager and
torch.compile alone again; each figure the median of its rounds.
"""
from __future__ import annotations

import statistics
import types
from pathlib import Path

from bbagent.agent.machine import this_machine
from bbagent.agent.serving.compiled import is_served
from bbagent.agent.serving.enable import enable
from bbagent.agent.serving.gate import ServingPlan, decided, sets_together, timed_set
from bbagent.agent.serving.model_numbers import compare_outputs, timed_ms

WARM_UP_CALLS = 3  # enough for CUDA graph trees to record and then replay
NEVER_RAN = "compiled code never ran it, even served alone (its region is not in this model's graphs)"


def check_compiled(model, inputs, eager, spec: dict, options: dict) -> dict:
    """The model compiled alone and with the kernels, against ``eager`` (its eager output), and
    timed (module docstring); which kernels and region answers compiled code called."""
    import torch
    settings = {} if spec["mode"] == "default" else {"mode": spec["mode"]}

    def alone_forward(*x):
        return model(*x)

    def served_forward(*x):
        return model(*x)
    torch._dynamo.reset()
    alone = _runner(torch.compile(alone_forward, **settings), inputs)
    alone_output = _warm(alone)
    alone_times = _rounds({"eager": _runner(model, inputs), "compile": alone}, spec)
    with enable(Path(spec["root"]), ops=spec["ops"], **options) as enabled:
        served = _runner(torch.compile(served_forward, **settings), inputs)
        served_output = _warm(served)
        uses = compiled_uses(enabled)  # counted before the timing's calls
        compiled_calls, sites = uses["compiled_calls"], uses["compiled_sites"]
        alone_over = enabled.alone_over_compile()
        used = any(compiled_calls.values()) or any(sites.values())
        served_times = _rounds({"bbagent": served}, spec) if used else None
    again = _rounds({"eager": _runner(model, inputs), "compile": alone}, spec)
    plan = (_gated(model, inputs, alone, spec, options, settings, gate_candidates(uses), alone_over)
            if spec["gate"] else None)
    atol, rtol = spec["atol"], spec["rtol"]
    result = {"mode": spec["mode"], "compile_alone": compare_outputs(eager, alone_output, atol, rtol),
              "compile_bbagent": compare_outputs(eager, served_output, atol, rtol), **uses}
    if plan is not None:
        result["gate"] = plan
    if served_times is not None:
        eager_ms = statistics.median(alone_times["eager"] + again["eager"])
        compile_ms = statistics.median(alone_times["compile"] + again["compile"])
        bbagent_ms = statistics.median(served_times["bbagent"])
        result["timing"] = {"eager_ms": eager_ms, "compile_ms": compile_ms, "bbagent_ms": bbagent_ms,
                            "speedup_over_compile": compile_ms / bbagent_ms, "speedup_over_eager": eager_ms / bbagent_ms,
                            "repeats": spec["repeats"], "iterations": spec["iterations"],
                            "all_ms": {"eager": alone_times["eager"] + again["eager"],
                                       "compile": alone_times["compile"] + again["compile"],
                                       "bbagent": served_times["bbagent"]}}
    return result


def _gated(model, inputs, alone, spec: dict, options: dict, settings: dict, candidates: list[str],
           alone_over: dict[str, float]) -> dict:
    """The whole-model gate (``agent.serving.gate``): each candidate in the model alone, then the
    sets of several (``sets_together``); the plan as a dict (``alone_over``: each one's own speedup
    over torch.compile)."""
    import torch
    measured = [_in_model([name], n, model, inputs, alone, spec, options, settings)
                for n, name in enumerate(candidates)]
    singles = [single for single in measured if single is not None]
    together = [timing for n, group in enumerate(sets_together(singles))
                if (timing := _in_model(group, len(candidates) + n, model, inputs, alone, spec, options, settings))]
    served, left_out = decided(singles, together, alone_over)
    left_out.update({name: NEVER_RAN for name, single in zip(candidates, measured) if single is None})
    here = this_machine()
    return ServingPlan(model=spec["model"], mode=spec["mode"], device=spec["device"],
                       gpu=torch.cuda.get_device_name() if spec["device"] == "cuda" else None, torch=here.torch,
                       triton=here.triton, served=served, left_out=left_out,
                       sets=singles + together).model_dump()


def gate_candidates(uses: dict) -> list[str]:
    """What the gate measures in the model (``uses``: ``compiled_uses`` with everything approved
    served): each overload or region answer compiled code ran, and every region answer enabled,
    run or not. Region answers can overlap (a gated MLP and the norm + gate/up region before it
    share the gate and up products); with all of them served, the pass swaps the one that starts
    first and the other never runs, yet alone it may be the faster."""
    ran = {name for name, count in {**uses["compiled_calls"], **uses["compiled_sites"]}.items() if count}
    return sorted(ran | {key for key, region in uses["regions"].items() if region["served"]})


def _in_model(members: list[str], number: int, model, inputs, alone, spec: dict, options: dict, settings: dict):
    """``members`` served alone in the compiled model: rounds of torch.compile alone before and
    after (the kernels enabled cannot be undone around each round), paired with the set's rounds;
    None where compiled code ran none of them (nothing to time)."""
    import torch
    before = _rounds({"compile": alone}, spec)["compile"]
    with enable(Path(spec["root"]), ops=members, **options) as enabled:
        served = _runner(torch.compile(own_function(model, number), **settings), inputs)
        _warm(served)
        uses = compiled_uses(enabled)
        ran = any(uses["compiled_calls"].get(name) or uses["compiled_sites"].get(name) for name in members)
        times = _rounds({"bbagent": served}, spec)["bbagent"] if ran else []
    if not ran:
        return None
    after = _rounds({"compile": alone}, spec)["compile"]
    return timed_set(members, [(b + a) / 2 for b, a in zip(before, after)], times)


def without_compile_caches() -> None:
    """Every graph compiled from here on is compiled, not taken from inductor's or AOT autograd's
    caches: what compiled code runs of the kernels (a region answer traced into a graph) is counted
    as inductor compiles the graph, and one from a cache counts nothing. The gate measures a set
    again that was compiled before (every candidate together, as with everything served), and a
    second check-model finds the first one's graphs on disk."""
    import torch
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


def own_function(model, number: int):
    """A function calling ``model`` with a code object of its own (torch.compile keeps compiled
    code per code object, and guards a module's tensors by their metadata: each set compiles anew)."""

    def forward(*x):
        return model(*x)
    code = forward.__code__.replace(co_name=f"bbagent_set_{number}")
    return types.FunctionType(code, forward.__globals__, code.co_name, None, forward.__closure__)


def _runner(function, inputs):
    import torch

    def run():
        with torch.no_grad():
            return function(*inputs)
    return run


def _warm(run):
    """The output of the last warm-up call, copied (CUDA graphs write the next replay's output
    over it)."""
    from torch.utils._pytree import tree_map
    for _ in range(WARM_UP_CALLS):
        output = run()
    return tree_map(lambda value: value.detach().clone() if hasattr(value, "detach") else value, output)


def _rounds(runs: dict, spec: dict) -> dict[str, list[float]]:
    """``repeats`` rounds of each run in turn: ms per call in each round, per run."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(spec["repeats"]):
        for name, run in runs.items():
            times[name].append(timed_ms(run, spec["device"], spec["iterations"]))
    return times


def compiled_uses(enabled) -> dict:
    """What compiled code ran of what ``enabled`` serves: the opaque calls and the traced sites per
    overload and region answer, and per operator and region answer how it runs or why not."""
    calls, sites = dict(enabled.compiled_calls()), dict(enabled.compiled_sites())
    kernels = {row["op"]: {"version": row["version"], "compiled_calls": row["compiled_calls"] or 0,
                           "compiled_sites": row["compiled_sites"] or 0, "under_compile": row["under_compile"]}
               for row in enabled.report()}
    regions = {key: {"served": is_served(why), "why": why, "calls": calls.get(key, 0), "sites": sites.get(key, 0)}
               for key, why in enabled.regions().items()}
    return {"compiled_calls": calls, "compiled_sites": sites, "kernels": kernels, "regions": regions}
