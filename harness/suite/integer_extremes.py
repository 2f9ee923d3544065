"""Integer extremes: tests whose integer tensors hold the values a kernel computing through a floating
type gets wrong. The ordinary integer tests draw small values (OpInfo's, and traces' -8..8), which
float32 and float64 hold exactly, so a relu or an add that casts its integers to float32 and back
passes them all and is wrong on ``2**24 + 1``.

Each integer dtype gets the tiers of ``TIERS`` that apply to it, one test each, so that the test a
kernel fails says why: past float32 (magnitudes above 2**24 that float64 still holds: int32's whole
range ends there), past float64 (int64's and uint64's values above 2**53 and their range's ends),
and for the narrow types, which both floats hold, their range's ends (and for unsigned types
values whose sums wrap around). From the first small case of the dtype (an OpInfo sample or a trace
input, one with 32 elements or more where there is one), every other element of each integer tensor
is set in turn to one of the tier's values and the rest keep their small values; each tensor starts
the cycle at another place, so an element meets an extreme in one argument and a small value, or
another extreme, in the other. Boolean tensors are left as they are.

Whether an integer tensor is data or an index is the operator's business, not a table's: the
rewritten case is kept only where aten accepts it, tried on CPU copies in a forked process first
(an index out of range is an error there, a device-side assert that ends the process on a GPU);
where aten refuses every integer tensor rewritten at once, each argument is tried alone (an
``index_select`` of int64 data by an int64 index keeps the data's extremes and the index's values).

A kernel whose integer result is wrong on such a test exactly where the operator computed through
float32 or float64 is wrong fails with ``integer_through_float`` (``diagnosed``), its message naming
the float; any other wrong result fails as it would on any test.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from bbagent.harness.inputs import describe_call, map_tensors, tensors_in
from bbagent.harness.suite.edge_cases import SMALL_NUMEL
from bbagent.harness.variants import schema_arguments

RULE = "integer_extremes"  # edge:integer_extremes_<tier> in a case's source


@dataclass(frozen=True)
class Tier:
    """One integer-extremes test of a dtype: the values it sets and what failing it says."""

    name: str
    values: Callable[[torch.iinfo], list[int]]
    applies: Callable[[torch.iinfo], bool]
    described: str  # the values, in words


def _past_float32(info: torch.iinfo) -> list[int]:
    candidates = [info.max, info.min, info.max - 1, info.min + 1, 2 ** 24 + 1, 2 ** 24 + 3, 2 ** 31 + 1,
                  2 ** 53 - 1, 2 ** 40 + 7]
    signed = [v for c in candidates for v in (c, -c)]
    return list(dict.fromkeys(v for v in signed if 2 ** 24 < abs(v) < 2 ** 53 and info.min <= v <= info.max))


def _past_float64(info: torch.iinfo) -> list[int]:
    candidates = [info.max, info.min, info.max - 1, info.min + 1, 2 ** 53 + 1, 2 ** 53 + 3, 2 ** 62 + 1]
    signed = [v for c in candidates for v in (c, -c)]
    return list(dict.fromkeys(v for v in signed if abs(v) > 2 ** 53 and info.min <= v <= info.max))


def _range_ends(info: torch.iinfo) -> list[int]:
    values = [info.max, info.min, info.max - 1, info.min + 1]
    if info.min == 0:  # unsigned: sums past the maximum wrap around
        values += [info.max // 2 + 1, info.max // 2 + 7]
    return values


TIERS = (
    Tier("past_float32", _past_float32, lambda info: info.max > 2 ** 24, "values past 2**24"),
    Tier("past_float64", _past_float64, lambda info: info.max > 2 ** 53, "values past 2**53"),
    Tier("range_ends", _range_ends, lambda info: info.max <= 2 ** 24, "the ends of its range"),
)


def is_integer(t: torch.Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


def with_extremes(t: torch.Tensor, values: list[int], number: int) -> torch.Tensor:
    """A contiguous copy of ``t`` with every other element set to one of ``values``, the cycle
    starting at ``number`` (the tensor's place among the call's integer tensors)."""
    out = t.clone(memory_format=torch.contiguous_format)
    flat = out.view(-1)
    positions = torch.arange(number % 2, flat.numel(), 2)
    if positions.numel() == 0:  # one element, an odd place: it gets an extreme too
        positions = torch.arange(0, 1)
    picks = torch.tensor(values, dtype=t.dtype)[(torch.arange(positions.numel()) + 3 * number) % len(values)]
    flat[positions.to(flat.device)] = picks.to(flat.device)
    return out


def _keys(op, args: tuple, kwargs: dict) -> list[tuple[str, torch.dtype]]:
    """(argument name, dtype) of the call's non-empty integer tensors, in order, one per tensor."""
    return [(name, t.dtype) for name, _, value in schema_arguments(op, args, kwargs)
            for t in tensors_in(value) if is_integer(t) and t.numel()]


def rewritten(op, args: tuple, kwargs: dict, tier: Tier, chosen: set[tuple[str, torch.dtype]]) -> tuple[tuple, dict]:
    """The call with its integer tensors of the (argument, dtype) pairs in ``chosen`` holding the
    tier's values."""
    number = iter(range(1 << 30))
    new_args, new_kwargs = [], {}
    for position, (name, _, value) in enumerate(schema_arguments(op, args, kwargs)):
        def apply(t: torch.Tensor, name=name) -> torch.Tensor:
            if not is_integer(t) or t.numel() == 0:
                return t
            place = next(number)
            if (name, t.dtype) not in chosen:
                return t
            return with_extremes(t, tier.values(torch.iinfo(t.dtype)), place)
        new = map_tensors(value, apply)
        if position < len(args):
            new_args.append(new)
        else:
            new_kwargs[name] = new
    return tuple(new_args), new_kwargs


def _fewest_integers(base) -> int:
    """Elements of the base case's smallest non-empty integer tensor (0 where it has none)."""
    return min((t.numel() for t in tensors_in(base.inputs()) if is_integer(t) and t.numel()), default=0)


MOST_PROBES = 8  # aten asked at most this many times per operator (each a fork on the CPU)
WANTED_ELEMENTS = 32  # a base case with this many elements meets every value of a tier


def derive_integer_extreme_cases(op, base_cases: list, make_case: Callable[..., Any],
                                 accepts: Callable[[Any, tuple, dict], bool]) -> list:
    """One case per (argument, integer dtype, tier) of the operator's small cases where aten accepts
    the rewrite (``accepts(op, args, kwargs)``: the suite's check, on CPU copies first). Per tier,
    all the call's new pairs are rewritten at once; where aten refuses that, each pair alone; a pair
    refused alone (an index) is not tried again. Base cases with ``WANTED_ELEMENTS`` elements or
    more in each integer tensor come first."""
    small = [base for base in base_cases if base.largest_tensor() <= SMALL_NUMEL]
    ordered = sorted(small, key=lambda base: (-min(_fewest_integers(base), WANTED_ELEMENTS), -base.largest_tensor()))
    derived: list = []
    done: set = set()
    refused: set = set()
    probes = 0
    for base in ordered:
        args, kwargs = base.inputs()
        keys = list(dict.fromkeys(key for key in _keys(op, args, kwargs) if key not in refused))
        for tier in TIERS:
            fresh = [key for key in keys if (key, tier.name) not in done and tier.applies(torch.iinfo(key[1]))]
            for chosen in [set(fresh)] + ([{key} for key in fresh] if len(fresh) > 1 else []) if fresh else []:
                if probes >= MOST_PROBES:
                    return derived
                probes += 1
                new_args, new_kwargs = rewritten(op, args, kwargs, tier, chosen)
                if accepts(op, new_args, new_kwargs):
                    named = ", ".join(f"{name} {str(dtype).removeprefix('torch.')}" for name, dtype in chosen)
                    derived.append(make_case(
                        id=f"edge-{RULE}_{tier.name}-{base.id}", source=f"edge:{RULE}_{tier.name} (from {base.id})",
                        args=new_args, kwargs=new_kwargs, dtype=base.dtype,
                        description=f"{describe_call(new_args, new_kwargs)} [{named}: {tier.name.replace('_', ' ')}]"))
                    done |= {(key, tier.name) for key in chosen}
                    break
                if len(chosen) == 1:
                    refused |= chosen
    return derived


def tier_of(case) -> Tier | None:
    """The integer-extremes tier ``case`` tests, or None for any other case."""
    rule = case.source.split(" ", 1)[0].removeprefix("edge:")
    return next((tier for tier in TIERS if rule == f"{RULE}_{tier.name}"), None)


THROUGH = ((torch.float64, 53), (torch.float32, 24))  # the wider first: it explains fewer wrong values


def _through_float(op, inputs: tuple[tuple, dict], through: torch.dtype) -> list[list[torch.Tensor]]:
    """What the operator gives on ``inputs`` computed through the float type ``through``, each way a
    kernel does it: its integer inputs rounded to that float and back, then the operator in
    integers; and the operator on the float values, its result converted back to the expected
    dtypes. The integer tensors of each result (a way aten refuses is left out)."""
    def rounded(t: torch.Tensor) -> torch.Tensor:
        return t.to(through).to(t.dtype) if is_integer(t) else t.clone()

    def as_float(t: torch.Tensor) -> torch.Tensor:
        return t.to(through) if is_integer(t) else t.clone()
    results = []
    for convert in (rounded, as_float):
        try:
            results.append(tensors_in(op(*map_tensors(inputs[0], convert), **map_tensors(inputs[1], convert))))
        except Exception:  # noqa: BLE001 - aten refuses this way (a bitwise op on floats): not how it was computed
            continue
    return results


def diagnosed(op, case, failure: dict, expected: Any, actual: Any, inputs: tuple[tuple, dict]) -> dict:
    """``failure`` as ``integer_through_float`` where ``case`` is an integer-extremes test, an integer
    tensor of the result is wrong, and every wrong element is what the operator gives computed through
    float32 or float64 (``_through_float``: run here on the test's inputs, ``inputs``); else as it
    is (a kernel wrong for another reason fails as it would on any test)."""
    tier = tier_of(case)
    if tier is None or failure.get("error_kind") not in ("mismatch", "mutation_mismatch"):
        return failure
    pairs = [(number, e, a) for number, (e, a) in enumerate(zip(tensors_in(expected), tensors_in(actual)))
             if is_integer(e) and e.shape == a.shape and e.dtype == a.dtype and not torch.equal(e, a)]
    if not pairs:
        return failure
    for through, bits in THROUGH:
        for result in _through_float(op, inputs, through):
            if all(number < len(result) and result[number].shape == a.shape
                   and bool((result[number].to(a.dtype)[e != a] == a[e != a]).all()) for number, e, a in pairs):
                dtype, name = str(pairs[0][1].dtype).removeprefix("torch."), str(through).removeprefix("torch.")
                return failure | {"error_kind": "integer_through_float", "message": (
                    f"{dtype} results on {tier.described} are what the operator gives computed through {name}, which "
                    f"holds integers exactly only up to 2**{bits} and does not wrap around as {dtype} arithmetic "
                    f"does: compute {dtype} values in an integer type; " + failure["message"])}
    return failure
