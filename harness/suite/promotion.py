"""Type-promotion tests derived from one small case: what an operator's result dtype is does not
depend on size, so these tiny cases run on the CPU interpreter as on the GPU.

From the first small floating-point case, each rule rewrites the inputs: Python numbers in place of
the other tensors, a 0-dim float16 first tensor with Python numbers (a wrapped number never
promotes a tensor), a 0-dim float32 operand next to a float16 tensor (a 0-dim tensor does not
promote a dimensioned one of the same category), float16 next to float32, integer inputs, an integer
tensor with a float number, bool inputs with bool scalars (``alpha=True``). As for the edge cases,
a derived case is kept only where the aten reference accepts it; the reference also decides what
the right result dtype is.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from bbagent.harness.inputs import describe_call, map_tensors, tensors_in
from bbagent.harness.ops import value_mode
from bbagent.harness.suite.edge_cases import SMALL_NUMEL


def _number_like(t: torch.Tensor) -> Any:
    """A Python number of ``t``'s category, taken from its values."""
    if t.dtype == torch.bool:
        return True
    value = t.flatten()[0].item() if t.numel() else 1
    if t.dtype.is_floating_point:
        return float(value) or 0.5
    return int(value) or 3


def _zero_dim(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (t.flatten()[:1].reshape(()) if t.numel() else torch.ones((), device=t.device)).to(dtype)


def _as_integers(t: torch.Tensor) -> torch.Tensor:
    return (t * 4).round().to(torch.int32) if t.dtype.is_floating_point else t


def _rewrite(args: tuple, kwargs: dict, first: Callable | None, others: Callable | None,
             numbers_at: frozenset = frozenset(), scalars: frozenset = frozenset()) -> tuple[tuple, dict]:
    """Apply ``first`` to the first floating tensor of the positional arguments and ``others`` to
    every other tensor; ``others`` may return a Python number only for a top-level argument whose
    position is in ``numbers_at`` (elsewhere the tensor stays). Scalar kwargs named in ``scalars``
    become True."""
    done: list[torch.Tensor] = []

    def rewrite(t: torch.Tensor, position: int | None):
        if not done and t.dtype.is_floating_point:
            done.append(t)
            return first(t) if first is not None else t
        new = others(t) if others is not None else t
        return new if isinstance(new, torch.Tensor) or position in numbers_at else t
    new_args = tuple(rewrite(value, i) if isinstance(value, torch.Tensor)
                     else map_tensors(value, lambda t: rewrite(t, None)) for i, value in enumerate(args))
    new_kwargs = {k: rewrite(v, None) if isinstance(v, torch.Tensor) else map_tensors(v, lambda t: rewrite(t, None))
                  for k, v in kwargs.items()}
    new_kwargs.update({name: True for name in scalars})
    return new_args, new_kwargs


def _floating(fn: Callable) -> Callable:
    """``fn`` for floating tensors; others stay as they are (index tensors keep their meaning)."""
    return lambda t: fn(t) if t.dtype.is_floating_point else t


# rule -> (first, others, Scalar arguments set to True)
RULES: dict[str, tuple[Callable | None, Callable | None, bool]] = {
    "python_numbers": (None, _floating(_number_like), False),
    "zero_dim_f16_and_numbers": (_floating(lambda t: _zero_dim(t, torch.float16)), _floating(_number_like), False),
    "f16_with_zero_dim_f32": (_floating(lambda t: t.to(torch.float16)),
                              _floating(lambda t: _zero_dim(t, torch.float32)), False),
    "f16_with_f32": (_floating(lambda t: t.to(torch.float16)), _floating(lambda t: t.to(torch.float32)), False),
    "integers": (_as_integers, _as_integers, False),
    "integer_with_float_number": (_as_integers, _floating(_number_like), False),
    "bools": (lambda t: t > 0, lambda t: t > 0, True),
}


def numbers_traced(op, calls: list) -> frozenset:
    """Positions of Tensor arguments for which the real-model trace ``calls`` of ``op`` pass a Python
    number: only there does a test pass one (the prompt tells the model where traces do)."""
    tensors = {i for i, a in enumerate(op._schema.arguments) if str(a.real_type) in ("Tensor", "Optional[Tensor]")}
    return frozenset(i for call in calls for i, value in enumerate(call.args)
                     if i in tensors and isinstance(value, (bool, int, float)))


def derive_promotion_cases(op, base_cases: list, make_case: Callable[..., Any], accepts: Callable,
                           calls: list) -> list:
    """One case per rule from the first small case whose first tensor is float32 (none for
    operators whose values are unspecified or random: their dtype rules are tested elsewhere)."""
    if value_mode(op) != "exact":
        return []
    small = [c for c in base_cases if c.dtype == "float32" and 0 < c.largest_tensor() <= SMALL_NUMEL
             and c.out_of is None and c.trace is None]
    # rather one whose tensors all have several elements (a 0-dim first tensor hides the 0-dim rules)
    base = next((c for c in small if all(t.numel() > 1 for t in tensors_in(c.inputs()))), small[0] if small else None)
    if base is None:
        return []
    base_args, base_kwargs = base.inputs()
    if not tensors_in(base_args):
        return []
    seen = {describe_call(base_args, base_kwargs)}
    numbers_at = numbers_traced(op, calls)
    scalar_kwargs = frozenset(a.name for a in op._schema.arguments if a.kwarg_only and str(a.type) == "number")
    derived = []
    for rule, (first, others, bool_scalars) in RULES.items():
        try:
            args, kwargs = _rewrite(base_args, base_kwargs, first, others, numbers_at,
                                    scalar_kwargs if bool_scalars else frozenset())
        except (RuntimeError, ValueError, TypeError):
            continue
        description = describe_call(args, kwargs)
        if description in seen or not accepts(op, args, kwargs):
            continue
        seen.add(description)
        dtype = next((str(t.dtype).removeprefix("torch.") for t in tensors_in(args)), "none")
        derived.append(make_case(id=f"promotion-{rule}", source=f"promotion:{rule} (from {base.id})", args=args,
                                 kwargs=kwargs, description=f"{description} [{rule.replace('_', ' ')}]", dtype=dtype))
    return derived
