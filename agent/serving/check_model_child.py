"""The child process of ``bbagent check-model`` (its parent side: ``agent.serving.check_model``).

It builds the model and input from a fixed seed (``agent.models``), records which aten
overloads one eager forward runs, then runs it eagerly and with ``bbagent.enable()``; compares the
outputs (``|out - eager| <= atol + rtol * |eager|`` everywhere); times both, interleaved; and on a
mismatch bisects over the enabled overloads to name the culprits. It writes one JSON result to
the file its parent names: stdout is free for whatever a kernel prints.

    python -m agent.serving.check_model_child SPEC.json RESULT.json
"""
from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

from bbagent.agent.errors import UsageError
from bbagent.agent.serving.check_model import CHILD_USAGE_ERROR
from bbagent.agent.serving.enable import enable
from bbagent.agent.serving.model_numbers import compare_outputs, timed_ms

MAX_BISECT_RUNS = 40


def _forward(model, inputs: tuple):
    import torch
    with torch.no_grad():
        return model(*inputs)


def ops_run(model, inputs) -> dict[str, int]:
    """The aten overloads one forward runs, with how often (a dispatch mode sees them all)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen[str(func)] += 1
            return func(*args, **(kwargs or {}))
    with Count() as counter:
        _forward(model, inputs)
    return dict(counter.seen.most_common())


def model_calls(served: dict, ran: dict[str, int]) -> dict[str, int]:
    """How often the model called a served overload: its calls at the top (``ops_run``) and those
    from inside other operators' kernels (embedding calls index_select), which only its
    registration sees, served or fallen back."""
    reached = served["calls"] + sum(served["fallbacks"].values())
    top = ran.get(served["op"], 0)
    return {"model_calls": max(top, reached), "calls_inside_other_ops": max(0, reached - top)}


def check(spec: dict) -> dict:
    import torch
    from bbagent.agent.models import built
    device = spec["device"]
    model, inputs = built(spec["model"], spec["config"], device, spec["dtype"], spec["seed"], spec["script"])
    atol, rtol = spec["atol"], spec["rtol"]
    options = dict(include_unreviewed=spec["include_unreviewed"], include_slower=spec["include_slower"],
                   device=device)
    ran = ops_run(model, inputs)
    eager = _forward(model, inputs)
    head = {"model": spec["model"], "script": spec["script"], "config": spec["config"], "device": device,
            "dtype": spec["dtype"],
            "seed": spec["seed"], "tolerance": {"atol": atol, "rtol": rtol}, "ops_run": ran}
    if device == "cuda":
        head["gpu"] = torch.cuda.get_device_name()
    if spec["compile"]:
        return {**head, **compiled_check(model, inputs, eager, spec, options)}
    with enable(Path(spec["root"]), ops=spec["ops"], **options) as enabled:
        output = _forward(model, inputs)
        served = {r["op"]: {**r, **model_calls(r, ran)} for r in enabled.report()}
        skipped = {op: why for op, why in enabled.skipped.items() if op in ran}
        slower = sorted(op for op in enabled.slower if op in ran)
    result = {**head, "served": served, "skipped_in_model": skipped, "slower_skipped": slower,
              **compare_outputs(eager, output, atol, rtol)}
    used = [op for op, r in served.items() if r["calls"]]
    result["status"] = ("mismatch" if not result["match"] else "match" if used else "nothing_served")
    if not used:
        result["why_nothing_served"] = nothing_served_because(ran, skipped)
    result["timing"] = time_both(model, inputs, spec, options, used) if used else None
    if not result["match"]:
        result["culprits"], result["bisect_runs"] = bisect(model, inputs, eager, spec, options, used)
    return result


def compiled_check(model, inputs, eager, spec: dict, options: dict) -> dict:
    """``--compile``: the comparison of the compiled model with the kernels against eager decides
    (``agent.serving.check_model_compiled``; ``--train``: training steps,
    ``agent.serving.check_model_train``); no bisection."""
    from bbagent.agent.serving.check_model_compiled import check_compiled, without_compile_caches
    from bbagent.agent.serving.check_model_train import check_training
    from bbagent.agent.serving.compiled import is_served
    without_compile_caches()
    if spec["train"]:
        compiled = check_training(model, inputs, spec, options)
    else:
        compiled = check_compiled(model, inputs, eager, spec, options)
    result = {"compiled": compiled, **compiled["compile_bbagent"]}
    used = any(compiled["compiled_calls"].values()) or any(compiled["compiled_sites"].values())
    result["status"] = "mismatch" if not result["match"] else "match" if used else "nothing_served"
    if not used:
        reasons = {**{op: r["under_compile"] for op, r in compiled["kernels"].items()
                      if not is_served(r["under_compile"])},
                   **{key: r["why"] for key, r in compiled["regions"].items() if not r["served"]}}
        result["why_nothing_served"] = ("; ".join(f"{name}: {why}" for name, why in sorted(reasons.items())) or
                                        "no approved kernel or region answer was called by the compiled model "
                                        "(none approved here, or none of its regions or operators is in this model)")
    return result


def nothing_served_because(ran: dict, skipped: dict) -> str:
    """Why no generated kernel served a call of the forward, in words."""
    if skipped:
        return "; ".join(f"{op}: {why}" for op, why in sorted(skipped.items()))
    return (f"no accepted kernel serves any of the {len(ran)} overloads the forward ran "
            f"({', '.join(sorted(ran)[:6])}{', ...' if len(ran) > 6 else ''})")


def time_both(model, inputs, spec: dict, options: dict, ops: list[str]) -> dict:
    """Median ms per forward, eager and with the kernels, over ``repeats`` interleaved rounds."""
    forward = lambda: _forward(model, inputs)  # noqa: E731
    for _ in range(2):
        forward()
    eager, enabled = [], []
    for _ in range(spec["repeats"]):
        eager.append(timed_ms(forward, spec["device"], spec["iterations"]))
        with enable(Path(spec["root"]), ops=ops, **options):
            forward()
            enabled.append(timed_ms(forward, spec["device"], spec["iterations"]))
    e, k = statistics.median(eager), statistics.median(enabled)
    return {"eager_ms": e, "enabled_ms": k, "speedup": e / k, "repeats": spec["repeats"],
            "iterations": spec["iterations"], "eager_all_ms": eager, "enabled_all_ms": enabled}


def bisect(model, inputs, eager, spec: dict, options: dict, ops: list[str]) -> tuple[list[list[str]], int]:
    """The enabled overloads behind the mismatch: one culprit at a time, by halving (a set whose
    halves each match alone is reported whole: they go wrong only together)."""
    runs = 0

    def wrong(subset: list[str]) -> bool:
        nonlocal runs
        runs += 1
        with enable(Path(spec["root"]), ops=subset, **options):
            output = _forward(model, inputs)
        return not compare_outputs(eager, output, spec["atol"], spec["rtol"])["match"]  # compared by aten alone

    def narrow(subset: list[str]) -> list[str]:
        if len(subset) == 1 or runs >= MAX_BISECT_RUNS:
            return subset
        half = len(subset) // 2
        for part in (subset[:half], subset[half:]):
            if wrong(part):
                return narrow(part)
        return subset

    culprits, remaining = [], list(ops)
    while remaining and runs < MAX_BISECT_RUNS and wrong(remaining):
        found = narrow(remaining)
        culprits.append(found)
        remaining = [op for op in remaining if op not in found]
    return culprits, runs


def main(argv: list[str]) -> int:
    spec_file, result_file = map(Path, argv)
    spec = json.loads(spec_file.read_text())
    try:
        result = check(spec)
    except UsageError as exc:  # a model that cannot be built here, kernels that cannot be enabled
        result_file.write_text(json.dumps({"usage_error": str(exc)}))
        return CHILD_USAGE_ERROR
    result_file.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
