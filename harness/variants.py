"""Overload variants read from the schema: which arguments an ``out=`` overload writes,
and the functional overload that computes the same thing.

``aten.add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)`` writes the
keyword-only ``out``; its functional sibling is the overload of the same packet whose
arguments are the remaining ones (``aten.add.Tensor``). Tests of an ``out=`` overload
are the functional tests with ``out`` tensors added (see ``with_out_tensors``).
"""
from __future__ import annotations

import torch

from bbagent.harness.inputs import map_tensors, poisoned_like
from bbagent.harness.ops import op_name, packet_name


def out_arguments(op) -> list[str]:
    """Names of the keyword-only arguments the overload writes (``Tensor(a!) out``)."""
    return [a.name for a in op._schema.arguments
            if a.kwarg_only and is_written(a)]


def _signature(arguments) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in arguments]


def overloads(name: str) -> list:
    """Every overload of ``torch.ops.aten.<name>`` (none when aten has no such packet)."""
    packet = getattr(torch.ops.aten, name, None)
    return [getattr(packet, overload) for overload in packet.overloads()] if packet is not None else []


def schema_arguments(op, args: tuple, kwargs: dict) -> list[tuple]:
    """(name, schema argument, value) for every argument actually passed."""
    schema_args = op._schema.arguments
    bound = [(a.name, a, v) for a, v in zip(schema_args, args)]
    by_name = {a.name: a for a in schema_args}
    return bound + [(k, by_name.get(k), v) for k, v in kwargs.items()]


def is_written(schema_arg) -> bool:
    """The schema marks the argument as written (``Tensor(a!)``)."""
    return schema_arg is not None and schema_arg.alias_info is not None and schema_arg.alias_info.is_write


def _writes(op) -> bool:
    return any(is_written(a) for a in op._schema.arguments)


def functional_sibling(op):
    """The functional overload an ``out=`` overload writes the result of, or None."""
    outs = set(out_arguments(op))
    if not outs:
        return None
    wanted = _signature(a for a in op._schema.arguments if a.name not in outs)
    return next((c for c in overloads(packet_name(op))
                 if not _writes(c) and _signature(c._schema.arguments) == wanted), None)


# How a test preallocates ``out``: in the result's shape, empty, of a wrong shape (both to be
# resized by the kernel), or in the result's shape but non-contiguous.
OUT_LAYOUTS = ("result", "empty", "wrong_shape", "strided")


def with_out_tensors(functional, out_names: list[str], args: tuple, kwargs: dict, layout: str = "result") -> dict:
    """``kwargs`` plus poisoned ``out`` tensors, laid out as ``layout`` says, for the functional result."""
    result = functional(*args, **kwargs)
    # one out argument takes the whole result (a Tensor, or a list for ``Tensor(a!)[] out``)
    results = (result,) if len(out_names) == 1 else result
    return {**kwargs, **{name: map_tensors(r, lambda t: _out_buffer(t, layout)) for name, r in zip(out_names, results)}}


def _out_buffer(result: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "result":
        return poisoned_like(result)
    if layout == "empty":
        return result.new_empty((0,))
    if layout == "wrong_shape":  # more elements than the result, in one dimension
        return poisoned_like(result.new_empty((result.numel() + 3,)))
    if layout == "strided":  # every other element of a buffer twice as wide in the last dimension
        wide = poisoned_like(result.new_empty(tuple(result.shape[:-1]) + (2 * result.shape[-1],)))
        return wide[..., ::2]
    raise ValueError(f"unknown out= layout {layout!r}; one of {OUT_LAYOUTS}")


def functional_of(op):
    """The functional overload that computes what ``op`` computes: ``op`` itself when it writes
    nothing; for ``name_.X`` the overload ``name.X`` with the same arguments; for an ``out=``
    overload its ``functional_sibling``. None when the schema has no such sibling."""
    if not _writes(op):
        return op
    if out_arguments(op):
        return functional_sibling(op)
    name = packet_name(op)
    if not name.endswith("_"):
        return None
    wanted = _signature(op._schema.arguments)
    return next((c for c in overloads(name[:-1])
                 if not _writes(c) and _signature(c._schema.arguments) == wanted), None)


def family_members(op) -> tuple:
    """(functional, members) of ``op``'s computation, from the schemas: its functional overload
    (None where it has none) and every overload computing the same, the functional first, then
    its in-place twin (``name_`` with the same arguments, ``self`` written) and its ``out=``
    overloads (the same arguments plus written keyword-only outputs); ``(None, (op,))`` where
    there is no functional overload."""
    functional = functional_of(op)
    if functional is None:
        return None, (op,)
    wanted = _signature(functional._schema.arguments)
    name = packet_name(functional)
    inplace = next((c for c in overloads(name + "_") if _signature(c._schema.arguments) == wanted), None)
    outs = [c for c in overloads(name) if out_arguments(c) and functional_sibling(c) is functional]
    return functional, (functional,) + ((inplace,) if inplace is not None else ()) + tuple(outs)


def variant_family(op) -> dict:
    """The calling conventions of one computation by name (``family_members``): ``functional``,
    ``inplace`` (or None), ``out`` and ``serves`` (every member, the functional first)."""
    functional, members = family_members(op)
    if functional is None:
        return {"functional": None, "inplace": None, "out": [], "serves": [op_name(op)]}
    inplace = [c for c in members[1:] if not out_arguments(c)]
    return {"functional": op_name(functional), "inplace": op_name(inplace[0]) if inplace else None,
            "out": [op_name(c) for c in members[1:] if out_arguments(c)], "serves": [op_name(c) for c in members]}
