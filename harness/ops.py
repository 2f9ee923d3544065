"""Resolve an exact aten overload name (``aten.relu.default``) to its OpOverload.

Names are matched exactly: ``relu`` or ``aten.relu`` is not an overload, and a
misspelling gets a short list of close matches instead of a traceback.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

import torch


class UnknownOpError(ValueError):
    """The name does not denote an aten overload. The message lists close matches."""


@dataclass(frozen=True)
class OverloadInfo:
    """What a prompt or a report needs to know about an overload."""

    name: str
    schema: str
    doc: str
    is_inplace: bool
    is_out: bool


def _all_overload_names(namespace: str = "aten") -> list[str]:
    ns = getattr(torch.ops, namespace)
    names: list[str] = []
    for packet_name in dir(ns):
        try:
            packet = getattr(ns, packet_name)
            overloads = packet.overloads()
        except Exception:  # noqa: BLE001 - not an op packet (module attributes, helpers)
            continue
        names.extend(f"{namespace}.{packet_name}.{o}" for o in overloads)
    return names


def close_matches(name: str, limit: int = 5) -> list[str]:
    """Overload names that look like ``name``: same packet first, then by spelling."""
    candidates = _all_overload_names()
    bare = name.removeprefix("aten.").split(".")[0]
    same_packet = [c for c in candidates if c.split(".")[1] == bare]
    fuzzy = difflib.get_close_matches(name if name.startswith("aten.") else f"aten.{name}",
                                      candidates, n=limit, cutoff=0.75)
    ordered = list(dict.fromkeys(same_packet[:limit] + fuzzy))
    return ordered[:limit]


def resolve_op(name: str) -> torch._ops.OpOverload:
    """Return the OpOverload for an exact name like ``aten.add.Tensor``."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "aten" or not all(parts):
        raise UnknownOpError(_unknown_message(name, "expected 'aten.<op>.<overload>'"))
    _, packet_name, overload_name = parts
    packet = getattr(torch.ops.aten, packet_name, None)
    if packet is None or not hasattr(packet, "overloads"):
        raise UnknownOpError(_unknown_message(name, f"no aten operator named '{packet_name}'"))
    if overload_name not in packet.overloads():
        raise UnknownOpError(_unknown_message(
            name, f"aten.{packet_name} has no overload '{overload_name}'"))
    return getattr(packet, overload_name)


def _unknown_message(name: str, reason: str) -> str:
    matches = close_matches(name)
    hint = ("; did you mean: " + ", ".join(matches)) if matches else ""
    return f"unknown operator '{name}': {reason}{hint}"


def packet_name(op: torch._ops.OpOverload) -> str:
    """``relu_`` for ``aten.relu_.default``: the operator name without namespace or overload."""
    return op._schema.name.split("::")[1]


def op_name(op: torch._ops.OpOverload) -> str:
    return f"aten.{packet_name(op)}.{op._overloadname}"


def value_mode(op) -> str:
    """How an op's values are compared: ``exact`` (within tolerance), ``metadata`` (the values
    are unspecified, e.g. ``empty``: shape, dtype, device and strides only) or ``distribution``
    (random ops: metadata plus a distribution test against an independent reference draw)."""
    if packet_name(op) in UNSPECIFIED_VALUES:
        return "metadata"
    if torch.Tag.nondeterministic_seeded in op.tags:
        return "distribution"
    return "exact"


UNSPECIFIED_VALUES = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
                                "empty_permuted"})


def tensor_arguments(overload: torch._ops.OpOverload) -> tuple[set[int], set[str]]:
    """Positions and names of the schema's plain Tensor arguments."""
    positions, names = set(), set()
    for i, argument in enumerate(overload._schema.arguments):
        if str(argument.type) != "Tensor":
            continue
        if argument.kwarg_only:
            names.add(argument.name)
        else:
            positions.add(i)
    return positions, names


def describe(op: torch._ops.OpOverload) -> OverloadInfo:
    schema = op._schema
    mutated = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    return OverloadInfo(
        name=op_name(op),
        schema=str(schema),
        doc=_doc_for(op),
        is_inplace=bool(mutated) and not any(a.kwarg_only for a in mutated),
        is_out=any(a.kwarg_only for a in mutated),
    )


def _doc_for(op: torch._ops.OpOverload) -> str:
    """First paragraph of the public torch function's docstring, if there is one."""
    base = packet_name(op).rstrip("_")
    for owner in (torch, torch.nn.functional, torch.Tensor):
        fn = getattr(owner, base, None)
        doc = getattr(fn, "__doc__", None)
        if doc:
            paragraphs = [p.strip() for p in doc.strip().split("\n\n") if p.strip()]
            return "\n".join(line.strip() for line in paragraphs[:2])[:1200]
    return ""
