"""Checks for random ops (tag ``nondeterministic_seeded``) beyond one draw's metadata.

A single draw of an OpInfo sample holds 25 or 125 values: too few for a distribution test to
tell uniform values scaled to a normal's mean and std from normal ones. And a distribution
test alone passes a kernel with a hard-coded seed, whose dropout mask is then the same on
every training step. So the reference and the candidate are each called ``calls`` times on
fresh copies of the test's inputs: seeded with ``s``, once more without reseeding, seeded
with ``s`` again, seeded with ``s + 1``, then without reseeding until the pooled draws hold
about ``POOLED_VALUES`` values (at most ``MAX_CALLS`` calls; ``MAX_RANDOM_CALLS_CPU`` under the
interpreter, where a draw costs ~50 ms, so the CPU check sees only coarse errors). The generator is the op's ``generator`` argument where the
schema has one, else the default generator (``torch.manual_seed``).

Wherever aten's own draws show a property, the candidate's must show it too:

* the same seed gives the same values (aten's first and third draws are equal);
* the next call gives new values (aten's first and second draws differ);
* another seed gives other values (aten's first and fourth draws differ).

Ops that draw nothing for some inputs (``bernoulli`` with p = 1, ``rrelu`` outside
training) show no difference in aten's draws, so nothing is asked of the kernel there.
Then all draws but the repeated one are pooled, per output, and compared by the
distribution test of ``harness.checks.compare``.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from bbagent.harness.suite.budget import MAX_RANDOM_CALLS_CPU
from bbagent.harness.checks.compare import compare, same_tensors
from bbagent.harness.inputs import tensors_in
from bbagent.harness.inputs import clone_value

FIRST_SEED = 20240607
POOLED_VALUES = 20_000
MAX_CALLS = 200
REPEATED_DRAW = 2  # the draw that repeats draw 0's seed: left out of the pool
SEED_RECIPE = ("take the kernel's seed from the generator, e.g. seed = torch.randint(2**31 - 1, (1,), "
               "generator=generator, device=x.device) (the default generator when none is passed), pass that "
               "tensor to the kernel and give tl.load(seed_ptr) to tl.rand/tl.randn/tl.randint")


def calls_for(values_per_call: int, device: str) -> int:
    """Calls per side: at least the four of the generator checks, then enough for the pool."""
    most = MAX_RANDOM_CALLS_CPU if device == "cpu" else MAX_CALLS
    return max(4, min(most, math.ceil(POOLED_VALUES / max(values_per_call, 1)) + 1))


def takes_generator(op) -> bool:
    return any(a.name == "generator" for a in op._schema.arguments)


def _with_generator(op, args: tuple, kwargs: dict, generator) -> tuple[tuple, dict]:
    """The call's arguments with ``generator`` set, positionally if the call passes it there."""
    position = [a.name for a in op._schema.arguments].index("generator")
    if position < len(args):
        return args[:position] + (generator,) + args[position + 1:], kwargs
    return args, {**kwargs, "generator": generator}


def _draws(fn: Callable, op, device: str, args: tuple, kwargs: dict, calls: int) -> list[Any]:
    """``calls`` results: seed s, next, seed s again, seed s + 1, next, next, ..."""
    results, generator = [], None
    seeds = (FIRST_SEED, None, FIRST_SEED, FIRST_SEED + 1) + (None,) * (calls - 4)
    for seed in seeds:
        if seed is not None:
            if takes_generator(op):
                generator = torch.Generator(device=device).manual_seed(seed)
            else:
                torch.manual_seed(seed)
        call_args, call_kwargs = clone_value((args, kwargs))
        if generator is not None:
            call_args, call_kwargs = _with_generator(op, call_args, call_kwargs, generator)
        results.append(fn(*call_args, **call_kwargs))
        if device == "cuda":
            torch.cuda.synchronize()
    return results


def _pooled(draws: list[Any]) -> tuple[torch.Tensor, ...]:
    """Each output's values over all draws but the repeated one, flattened end to end."""
    kept = [tensors_in(d) for i, d in enumerate(draws) if i != REPEATED_DRAW]
    return tuple(torch.cat([outputs[k].detach().flatten() for outputs in kept]) for k in range(len(kept[0])))


def generator_misuse(op, expected: list[Any], actual: list[Any]) -> str | None:
    source = "the generator argument" if takes_generator(op) else "the default generator (torch.manual_seed)"
    if same_tensors(expected[0], expected[2]) and not same_tensors(actual[0], actual[2]):
        return (f"not reproducible: seeded twice with the same seed through {source}, the kernel "
                "returned different values (aten returns the same)")
    if not same_tensors(expected[0], expected[1]) and same_tensors(actual[0], actual[1]):
        return ("the same values on two successive calls with one generator: the kernel does not "
                "advance the generator's state (aten draws new values on every call)")
    if not same_tensors(expected[0], expected[3]) and same_tensors(actual[0], actual[3]):
        return f"the same values for two different seeds: the kernel ignores {source}"
    return None


def random_failure(op, args: tuple, kwargs: dict, kernel: Callable, device: str, values_per_call: int,
                   run_candidate: Callable[[Callable], Any]) -> dict | None:
    """None when the kernel's draws follow the generator wherever aten's do and their pooled
    values pass the distribution test, else a failure. ``run_candidate(thunk)`` runs the
    candidate's calls under the harness's guards."""
    calls = calls_for(values_per_call, device)
    expected = _draws(op, op, device, args, kwargs, calls)
    actual = run_candidate(lambda: _draws(kernel, op, device, args, kwargs, calls))
    problem = generator_misuse(op, expected, actual)
    if problem:
        return {"error_kind": "generator_misuse", "message": f"{problem}; {SEED_RECIPE}"}
    if len(tensors_in(actual[0])) != len(tensors_in(expected[0])):
        return None  # a structure the single-draw comparison already accepted; nothing to pool
    pooled_expected, pooled_actual = _pooled(expected), _pooled(actual)
    for k, (e, a) in enumerate(zip(pooled_expected, pooled_actual)):
        name = "output" if len(pooled_expected) == 1 else f"output[{k}]"
        failure = compare(e, a, f"{name} pooled over {calls - 1} calls", mode="distribution")
        if failure:
            return failure
    return None
