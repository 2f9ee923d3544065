"""The ``kernel(...)`` signature a prompt asks for, derived from the overload's schema.

Every argument keeps its schema name and order; an argument with a default in the schema
(``None`` included) gets that default, so that calls which leave it out still bind;
keyword-only arguments follow a ``*``. A schema name that is a Python keyword (``from``)
gets a trailing underscore: such arguments are positional, so the name never matters to
the caller. Each argument is also described by the Python value it arrives as, with what
the real-model traces actually pass where that differs from the schema type (a Python
number for a ``Tensor`` argument, say).
"""
from __future__ import annotations

import keyword
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bbagent.harness.interface import TensorSpec, TraceCall

# c10::ScalarType codes, as a schema default spells a dtype (``ScalarType? dtype=4``).
_SCALAR_TYPES = {0: "torch.uint8", 1: "torch.int8", 2: "torch.int16", 3: "torch.int32", 4: "torch.int64",
                 5: "torch.float16", 6: "torch.float32", 7: "torch.float64", 11: "torch.bool",
                 15: "torch.bfloat16"}
_WORDS = {
    "Tensor": "a torch.Tensor", "int": "a Python int", "SymInt": "a Python int", "float": "a Python float",
    "bool": "a Python bool", "number": "a Python number (int, float or bool)", "str": "a Python str",
    "ScalarType": "a torch.dtype", "Layout": "a torch.layout", "Device": "a torch.device",
    "MemoryFormat": "a torch.memory_format", "Generator": "a torch.Generator",
}
_PLURAL = {"Tensor": "torch.Tensor objects", "int": "Python ints", "SymInt": "Python ints", "float": "Python floats",
           "bool": "Python bools", "number": "Python numbers"}


@dataclass(frozen=True)
class Parameter:
    name: str                 # the Python parameter name
    schema_name: str
    kind: str                 # the schema type as torch reads it: Tensor, Optional[List[int]], number, ...
    default: str | None       # a Python expression, or None when the argument is required
    keyword_only: bool
    numbers_seen: int = 0     # traced calls that pass a Python number for this Tensor argument
    calls_seen: int = 0       # traced calls looked at

    @property
    def schema_type(self) -> str:
        return schema_spelling(self.kind)

    @property
    def arrives_as(self) -> str:
        """The Python value the kernel receives, in words."""
        words = _arrives_as(self.kind)
        if self.numbers_seen:
            words += (f"; in {self.numbers_seen} of the {self.calls_seen} traced calls a Python number instead "
                      "(it acts as a 0-dim tensor that does not raise the result's dtype within its category: "
                      "a float16 tensor with 2.5 stays float16, an int tensor with 2.5 becomes float32)")
        return words

    def source(self) -> str:
        return self.name if self.default is None else f"{self.name}={self.default}"


def parameters(op: torch._ops.OpOverload, calls: Sequence[TraceCall] = ()) -> list[Parameter]:
    """The kernel's parameters for ``op``; ``calls`` (the trace calls its tests use) add what
    they really pass where that differs from the schema type."""
    arguments = op._schema.arguments
    seen = _values_seen(arguments, calls)
    result = []
    for arg in arguments:
        kind = str(arg.real_type)
        numbers = seen.get(arg.name, Counter())["number"] if kind in ("Tensor", "Optional[Tensor]") else 0
        result.append(Parameter(
            name=arg.name + "_" if keyword.iskeyword(arg.name) else arg.name,
            schema_name=arg.name, kind=kind,
            default=python_default(arg) if arg.has_default_value() else None,
            keyword_only=arg.kwarg_only, numbers_seen=numbers, calls_seen=len(calls)))
    return result


def signature(params: list[Parameter]) -> str:
    """``self, dim, keepdim=False, *, dtype=None``: the text between ``def kernel(`` and ``)``."""
    parts, star = [], False
    for p in params:
        if p.keyword_only and not star:
            parts.append("*")
            star = True
        parts.append(p.source())
    return ", ".join(parts)


def schema_spelling(kind: str) -> str:
    """``Optional[List[int]]`` -> ``int[]?``, ``number`` -> ``Scalar``."""
    if kind.startswith("Optional[") and kind.endswith("]"):
        return schema_spelling(kind[len("Optional["):-1]) + "?"
    if kind.startswith("List[") and kind.endswith("]"):
        return schema_spelling(kind[len("List["):-1]) + "[]"
    return "Scalar" if kind == "number" else kind


def _arrives_as(kind: str) -> str:
    if kind.startswith("Optional[") and kind.endswith("]"):
        return _arrives_as(kind[len("Optional["):-1]) + " or None"
    if kind.startswith("List[Optional[") and kind.endswith("]]"):
        inner = kind[len("List[Optional["):-2]
        return f"a list whose items are each {_WORDS.get(inner, inner)} or None"
    if kind.startswith("List[") and kind.endswith("]"):
        inner = kind[len("List["):-1]
        return f"a list of {_PLURAL.get(inner, inner)}"
    return _WORDS.get(kind, kind)


def python_default(arg) -> str:
    """The schema default as a Python expression (``ScalarType? dtype=4`` -> ``torch.int64``)."""
    value, kind = arg.default_value, str(arg.real_type)
    if value is None:
        return "None"
    if "ScalarType" in kind and isinstance(value, int):
        return _SCALAR_TYPES.get(value, repr(value))
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    return repr(value)


def _values_seen(arguments, calls: Sequence[TraceCall]) -> dict[str, Counter]:
    """Per schema argument, the Python types of what the trace calls pass for it."""
    seen: dict[str, Counter] = {}
    for call in calls:
        bound = dict(zip((a.name for a in arguments), call.args))
        bound.update(call.kwargs)
        for name, value in bound.items():
            seen.setdefault(name, Counter())[_value_kind(value)] += 1
    return seen


def _value_kind(value) -> str:
    if isinstance(value, TensorSpec):
        return "tensor"
    if isinstance(value, (bool, int, float)):
        return "number"
    return type(value).__name__
