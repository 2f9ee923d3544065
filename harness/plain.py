"""A kernel's result is plain data: exactly ``torch.Tensor``, plain containers and plain scalars.

Every comparison the judge makes goes through torch on the returned object. A ``torch.Tensor``
subclass (or a ``Parameter``, or anything with its own ``__torch_function__`` or
``__torch_dispatch__``) runs its own Python code whenever torch touches it, so it can compute
the expected answer for the judge while the kernel computed nothing, and the same object would
flow into a user's model. So the result is checked first, by the objects' exact types (``type()``
reads the object's real class; no override can answer for it), before anything touches it, and
containers are read through the base classes' own methods. Tensors the call writes (in-place
``self``, ``out=``) and every other tensor argument are checked the same way after the call: a
kernel can reassign an argument's ``__class__``.

Used where a kernel is called: the tests and the timing phase (``harness.adapters.serving`` wraps
every kernel), ``bbagent.enable()`` and ``bbagent.load()``; each refuses such a result with
``NotPlainTensor``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

# Leaves a result may hold besides tensors: what aten's schemas return (numbers, bools, None,
# dtypes and friends) and numpy's scalars (whose comparisons are numpy's, not the kernel's).
SCALAR_TYPES = frozenset({int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout,
                          torch.memory_format, torch.Size})
ADVICE = ("a kernel must return plain torch.Tensor objects (exactly torch.Tensor: no subclass, no Parameter, no "
          "object with its own __torch_function__ or __torch_dispatch__, no wrapper): allocate the result with "
          "torch.empty/torch.empty_like, write it in a @triton.jit kernel and return it as it is")


class NotPlainTensor(TypeError):
    """The kernel returned or wrote something other than plain tensors, containers and scalars."""


def _numpy_scalar_types() -> frozenset:
    try:
        import numpy
    except ImportError:
        return frozenset()
    return frozenset(t for t in set(numpy.sctypeDict.values()) if issubclass(t, numpy.generic))


NUMPY_SCALAR_TYPES = _numpy_scalar_types()


def _is_return_type(kind: type) -> bool:
    """``torch.return_types.max`` and its like: named tuples that torch itself defines (C types)."""
    return issubclass(kind, tuple) and getattr(torch.return_types, kind.__name__, None) is kind


def _type_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def not_plain(value: Any, path: str = "the result", own: frozenset = frozenset()) -> str | None:
    """Why ``value`` is not plain data (the first offence, naming where it is), or None. A tensor
    whose ``id`` is in ``own`` is one of the call's own arguments (an in-place result is ``self``):
    the caller's object, whatever its class."""
    kind = type(value)
    if kind is torch.Tensor or (own and id(value) in own):
        return None
    if isinstance(value, torch.Tensor):
        return f"{path} is a {_type_name(kind)}, a subclass of torch.Tensor"
    if kind in SCALAR_TYPES or kind in NUMPY_SCALAR_TYPES:
        return None
    if kind is tuple or kind is list or _is_return_type(kind):
        base = list if kind is list else tuple
        for i in range(base.__len__(value)):
            why = not_plain(base.__getitem__(value, i), f"{path}[{i}]", own)
            if why:
                return why
        return None
    return f"{path} is a {_type_name(kind)}, not a tensor, a tuple or list of them, or a number"


def check_plain(value: Any, path: str = "the result", own: frozenset = frozenset()) -> None:
    """Raise ``NotPlainTensor`` naming the first part of ``value`` that is not plain data."""
    why = not_plain(value, path, own)
    if why:
        raise NotPlainTensor(f"{why}; {ADVICE}")


def _argument_tensors(args: tuple, kwargs: dict) -> list[tuple[str, torch.Tensor]]:
    """(where, tensor) for the tensors among the arguments and in their lists and tuples."""
    found = []
    for where, value in [(f"argument {i}", v) for i, v in enumerate(args)] + \
                        [(f"argument '{k}'", v) for k, v in kwargs.items()]:
        if isinstance(value, torch.Tensor):
            found.append((where, value))
        elif type(value) in (list, tuple):
            found += [(f"{where}[{i}]", v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return found


def plain_only(kernel: Callable) -> Callable:
    """``kernel`` whose result must be plain data (one of its own tensor arguments excepted, as an
    in-place overload returns ``self``), and whose tensor arguments keep their classes."""
    @functools.wraps(kernel)
    def checked(*args, **kwargs):
        arguments = [(where, t, type(t)) for where, t in _argument_tensors(args, kwargs)]
        result = kernel(*args, **kwargs)
        for where, t, kind in arguments:
            if type(t) is not kind:
                raise NotPlainTensor(f"{where} was a {_type_name(kind)} and the call made it a "
                                     f"{_type_name(type(t))}; {ADVICE}")
        check_plain(result, own=frozenset(id(t) for _, t, _ in arguments))
        return result
    return checked
