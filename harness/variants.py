"""Overload variants read from the schema: which arguments an ``out=`` overload writes,
and the functional overload that computes the same thing.

``aten.add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)`` writes the
keyword-only ``out``; its functional sibling is the overload of the same packet whose
arguments are the remaining ones (``aten.add.Tensor``). Tests of an ``out=`` overload
are the functional tests with ``out`` tensors added (see ``with_out_tensors``).
"""
from __future__ import annotations

import torch

from harness.inputs import map_tensors, poisoned_like
from harness.ops import packet_name


def out_arguments(op) -> list[str]:
    """Names of the keyword-only arguments the overload writes (``Tensor(a!) out``)."""
    return [a.name for a in op._schema.arguments
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def _signature(arguments) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in arguments]


def functional_sibling(op):
    """The functional overload an ``out=`` overload writes the result of, or None."""
    outs = set(out_arguments(op))
    if not outs:
        return None
    wanted = _signature(a for a in op._schema.arguments if a.name not in outs)
    packet = getattr(torch.ops.aten, packet_name(op))
    for name in packet.overloads():
        candidate = getattr(packet, name)
        if (not any(a.alias_info is not None and a.alias_info.is_write for a in candidate._schema.arguments)
                and _signature(candidate._schema.arguments) == wanted):
            return candidate
    return None


def with_out_tensors(functional, out_names: list[str], args: tuple, kwargs: dict) -> dict:
    """``kwargs`` plus poisoned ``out`` tensors shaped like the functional result."""
    result = functional(*args, **kwargs)
    # one out argument takes the whole result (a Tensor, or a list for ``Tensor(a!)[] out``)
    results = (result,) if len(out_names) == 1 else result
    return {**kwargs, **{name: map_tensors(r, poisoned_like) for name, r in zip(out_names, results)}}
