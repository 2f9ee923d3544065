"""``bbagent check-model --train``, in the child: training steps of the model (forward, a loss,
backward, an SGD step) run eagerly, compiled by ``torch.compile`` alone, and compiled again with
``bbagent.enable()`` on, each from the same weights and inputs.

The loss is the mean square of every floating output (a model's own loss, where it returns one,
is such an output). The losses of every step and the gradients of the first are compared with
eager's within the check's tolerances, torch.compile's own as bbagent's; each run's time per step
is the median of its steps after the first (which compiles), and its peak memory is the most the
allocator held during its steps. While the kernels are enabled every aten call reaches them, the
optimizer's included: the third run is the model trained as it would be with bbagent.
"""
from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path

from bbagent.agent.errors import UsageError
from bbagent.agent.serving.check_model_compiled import compiled_uses, own_function
from bbagent.agent.serving.enable import enable
from bbagent.agent.serving.model_numbers import compare_outputs

LEARNING_RATE = 1e-3


def check_training(model, inputs: tuple, spec: dict, options: dict) -> dict:
    """The three runs (module docstring), compared and timed; which kernels and region answers
    compiled code ran, as ``check_model_compiled`` says it for forwards."""
    import torch
    settings = {} if spec["mode"] == "default" else {"mode": spec["mode"]}
    torch._dynamo.reset()
    eager = _train(model, inputs, lambda m: m, spec)
    alone = _train(model, inputs, lambda m: torch.compile(own_function(m, 0), **settings), spec)
    with enable(Path(spec["root"]), ops=spec["ops"], **options) as enabled:
        served = _train(model, inputs, lambda m: torch.compile(own_function(m, 1), **settings), spec)
        uses = compiled_uses(enabled)
    atol, rtol = spec["atol"], spec["rtol"]
    runs = {"eager": eager, "compile": alone, "bbagent": served}
    timing = {f"{name}_ms": run["ms_per_step"] for name, run in (("eager", eager), ("compile", alone),
                                                                   ("bbagent", served))}
    timing.update(speedup_over_compile=alone["ms_per_step"] / served["ms_per_step"],
                  speedup_over_eager=eager["ms_per_step"] / served["ms_per_step"], repeats=spec["steps"] - 1,
                  iterations=1, all_ms={name: run["step_ms"] for name, run in runs.items()})
    return {"mode": spec["mode"], "train": {"steps": spec["steps"], "learning_rate": LEARNING_RATE,
                                           "losses": {name: run["losses"] for name, run in runs.items()},
                                           "peak_mib": {name: run["peak_mib"] for name, run in runs.items()}},
            "compile_alone": _compared(eager, alone, atol, rtol), "compile_bbagent": _compared(eager, served, atol, rtol),
            "timing": timing, **uses}


def loss_of(output):
    """The mean square of every floating tensor in ``output``, summed, in float32."""
    from torch.utils._pytree import tree_leaves
    floating = [leaf for leaf in tree_leaves(output) if hasattr(leaf, "is_floating_point") and leaf.is_floating_point()]
    if not floating:
        raise UsageError("--train: the model returns no floating-point tensor to train on (its loss is the mean "
                         "square of its floating outputs)")
    return sum(leaf.float().square().mean() for leaf in floating)


def _train(model, inputs: tuple, wrap, spec: dict) -> dict:
    """``spec["steps"]`` SGD steps of a copy of ``model`` (in training mode) run through
    ``wrap(copy)``: each step's loss and time, the first step's gradients, the peak memory."""
    import torch
    device = spec["device"]
    trained = copy.deepcopy(model).train()
    run = wrap(trained)
    parameters = [p for p in trained.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(parameters, lr=LEARNING_RATE)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        sync()
        torch.cuda.reset_peak_memory_stats()
    losses, step_ms, gradients = [], [], None
    for step in range(spec["steps"]):
        torch.manual_seed(spec["seed"] + step)
        started = time.perf_counter()
        loss = loss_of(run(*inputs))
        loss.backward()
        if step == 0:
            gradients = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in parameters]
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        step_ms.append((time.perf_counter() - started) * 1000)
        losses.append(float(loss.detach()))
    peak = torch.cuda.max_memory_allocated() / 2 ** 20 if device == "cuda" else None
    return {"losses": losses, "gradients": gradients, "step_ms": step_ms,
            "ms_per_step": statistics.median(step_ms[1:]), "peak_mib": peak}


def _compared(expected: dict, actual: dict, atol: float, rtol: float) -> dict:
    """The losses of every step and the first step's gradients of ``actual`` against ``expected``'s."""
    import torch
    return compare_outputs({"losses": torch.tensor(expected["losses"]), "gradients": expected["gradients"]},
                           {"losses": torch.tensor(actual["losses"]), "gradients": actual["gradients"]}, atol, rtol)
