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
from pathlib import Path

from bbagent.agent.serving.compiled import is_served
from bbagent.agent.serving.enable import enable
from bbagent.agent.serving.model_numbers import compare_outputs, timed_ms

WARM_UP_CALLS = 3  # enough for CUDA graph trees to record and then replay


def check_compiled(model, inputs, eager, spec: dict, options: dict) -> dict:
    """The model compiled alone and with the kernels, against ``eager`` (its eager output), and
    timed (module docstring); which kernels and region answers compiled code called."""
    import torch
    settings = {} if spec["mode"] == "default" else {"mode": spec["mode"]}

    def alone_forward(x):
        return model(x)

    def served_forward(x):
        return model(x)
    torch._dynamo.reset()
    alone = _runner(torch.compile(alone_forward, **settings), inputs)
    alone_output = _warm(alone)
    alone_times = _rounds({"eager": _runner(model, inputs), "compile": alone}, spec)
    with enable(Path(spec["root"]), ops=spec["ops"], **options) as enabled:
        served = _runner(torch.compile(served_forward, **settings), inputs)
        served_output = _warm(served)
        compiled_calls = dict(enabled.compiled_calls())  # counted before the timing's calls
        sites = dict(enabled.compiled_sites())
        kernels = _served_rows(enabled)
        regions = enabled.regions()
        used = any(compiled_calls.values()) or any(sites.values())
        served_times = _rounds({"bbagent": served}, spec) if used else None
    again = _rounds({"eager": _runner(model, inputs), "compile": alone}, spec)
    atol, rtol = spec["atol"], spec["rtol"]
    result = {"mode": spec["mode"], "compile_alone": compare_outputs(eager, alone_output, atol, rtol),
              "compile_bbagent": compare_outputs(eager, served_output, atol, rtol), "compiled_calls": compiled_calls,
              "compiled_sites": sites, "kernels": kernels,
              "regions": {key: {"served": is_served(why), "why": why, "calls": compiled_calls.get(key, 0),
                                "sites": sites.get(key, 0)}
                          for key, why in regions.items()}}
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


def _runner(function, inputs):
    import torch

    def run():
        with torch.no_grad():
            return function(inputs)
    return run


def _warm(run):
    """The output of the last warm-up call, copied (CUDA graphs write the next replay's output
    over it)."""
    for _ in range(WARM_UP_CALLS):
        output = run()
    return output.detach().clone()


def _rounds(runs: dict, spec: dict) -> dict[str, list[float]]:
    """``repeats`` rounds of each run in turn: ms per call in each round, per run."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(spec["repeats"]):
        for name, run in runs.items():
            times[name].append(timed_ms(run, spec["device"], spec["iterations"]))
    return times


def _served_rows(enabled) -> dict[str, dict]:
    """Per operator served by a generated kernel: its compiled calls, or why compiled code does
    not call it."""
    return {row["op"]: {"version": row["version"], "compiled_calls": row["compiled_calls"] or 0,
                        "compiled_sites": row["compiled_sites"] or 0, "under_compile": row["under_compile"]}
            for row in enabled.report()}
