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

from harness.inputs import describe_call, map_tensors, tensors_in
from harness.ops import value_mode

SMALL_NUMEL = 4096


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
             scalars: Callable | None = None) -> tuple[tuple, dict]:
    """Apply ``first`` to the first floating tensor of the positional arguments, ``others`` to
    every other tensor (either may return a Python number), ``scalars`` to Python-number kwargs."""
    seen = []

    def one(t: torch.Tensor):
        is_first = not seen and t.dtype.is_floating_point
        if is_first:
            seen.append(t)
        fn = first if is_first else others
        return fn(t) if fn is not None else t
    new_args = map_tensors(args, one)
    new_kwargs = map_tensors(kwargs, others) if others is not None else kwargs
    if scalars is not None:
        new_kwargs = {k: scalars(v) if isinstance(v, (bool, int, float)) and k != "dim" else v
                      for k, v in new_kwargs.items()}
    return new_args, new_kwargs


def _floating(fn: Callable) -> Callable:
    """``fn`` for floating tensors; others stay as they are (index tensors keep their meaning)."""
    return lambda t: fn(t) if t.dtype.is_floating_point else t


RULES: dict[str, Callable[[tuple, dict], tuple[tuple, dict]]] = {
    "python_numbers": lambda a, k: _rewrite(a, k, None, _floating(_number_like)),
    "zero_dim_f16_and_numbers": lambda a, k: _rewrite(a, k, _floating(lambda t: _zero_dim(t, torch.float16)),
                                                       _floating(_number_like)),
    "f16_with_zero_dim_f32": lambda a, k: _rewrite(a, k, _floating(lambda t: t.to(torch.float16)),
                                                    _floating(lambda t: _zero_dim(t, torch.float32))),
    "f16_with_f32": lambda a, k: _rewrite(a, k, _floating(lambda t: t.to(torch.float16)),
                                          _floating(lambda t: t.to(torch.float32))),
    "integers": lambda a, k: _rewrite(a, k, _as_integers, _as_integers),
    "integer_with_float_number": lambda a, k: _rewrite(a, k, _as_integers, _floating(_number_like)),
    "bools": lambda a, k: _rewrite(a, k, lambda t: t > 0, lambda t: t > 0, scalars=lambda v: True),
}


def derive_promotion_cases(op, base_cases: list, make_case: Callable[..., Any], accepts: Callable) -> list:
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
    derived = []
    for rule, rewrite in RULES.items():
        try:
            args, kwargs = rewrite(base_args, base_kwargs)
        except (RuntimeError, ValueError, TypeError):
            continue
        if rule == "bools":  # bool Scalar arguments too (add's alpha=True)
            kwargs = {**kwargs, **{a.name: True for a in op._schema.arguments
                                   if a.kwarg_only and str(a.type) in ("Scalar", "number") and a.name not in kwargs}}
        description = describe_call(args, kwargs)
        if description in seen or not accepts(op, args, kwargs):
            continue
        seen.add(description)
        dtype = next((str(t.dtype).removeprefix("torch.") for t in tensors_in(args)), "none")
        derived.append(make_case(id=f"promotion-{rule}", source=f"promotion:{rule} (from {base.id})", args=args,
                                 kwargs=kwargs, description=f"{description} [{rule.replace('_', ' ')}]", dtype=dtype))
    return derived
