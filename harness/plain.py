"""A kernel's result is plain data: exactly ``torch.Tensor``, plain containers and plain scalars.

Every comparison the judge makes goes through torch on the returned object. A ``torch.Tensor``
subclass (or a ``Parameter``, or anything with its own ``__torch_function__`` or
``__torch_dispatch__``) runs its own Python code whenever torch touches it, so it can compute
the expected answer for the judge while the kernel computed nothing, and the same object would
flow into a user's model. So the result is checked first, by the objects' exact types (``type()``
reads the object's real class; no override can answer for it), before anything touches it, and
containers are read through the base classes' own methods. One of the call's own tensor arguments
may come back as it is, whatever its class (an in-place overload returns ``self``: in a model, a
``Parameter``). Every argument (and every tensor in a list argument) must keep its class: a kernel
can reassign a tensor's ``__class__``, which would then answer for the tensors it writes.

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


def _type_name(kind: type | tuple[type, ...]) -> str:
    """A class by its full name; a list's or tuple's classes as ``a list of 2 (…, …)``."""
    if isinstance(kind, tuple):
        return f"list of {len(kind)} ({', '.join(_type_name(k) for k in kind)})"
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


def _classes(values) -> list:
    """Each value's class; a list's or tuple's, its elements' classes (``cat``'s tensors)."""
    return [tuple(map(type, v)) if type(v) in (list, tuple) else type(v) for v in values]


def _changed_class(args: tuple, kwargs: dict, before: list) -> str | None:
    """Where an argument (or an element of a list argument) is now of another class than ``before``."""
    values = list(args) + list(kwargs.values())
    names = [f"argument {i}" for i in range(len(args))] + [f"argument '{k}'" for k in kwargs]
    for name, value, was in zip(names, values, before):
        now = tuple(map(type, value)) if type(value) in (list, tuple) else type(value)
        if now != was:
            old, new = next(((a, b) for a, b in zip(was, now) if a is not b), (was, now)) \
                if isinstance(was, tuple) and isinstance(now, tuple) else (was, now)
            return f"{name} was a {_type_name(old)} and the call made it a {_type_name(new)}"
    return None


def plain_only(kernel: Callable) -> Callable:
    """``kernel`` whose result must be plain data (one of its own tensor arguments excepted, as an
    in-place overload returns ``self``), and whose arguments keep their classes (about a microsecond
    a call where the result is one tensor)."""
    @functools.wraps(kernel)
    def checked(*args, **kwargs):
        before = _classes(list(args) + list(kwargs.values()))
        result = kernel(*args, **kwargs)
        if _classes(list(args) + list(kwargs.values())) != before:
            raise NotPlainTensor(f"{_changed_class(args, kwargs, before)}; {ADVICE}")
        if type(result) is not torch.Tensor:
            own = frozenset(id(t) for v in (*args, *kwargs.values())
                            for t in (v if type(v) in (list, tuple) else (v,)) if isinstance(t, torch.Tensor))
            check_plain(result, own=own)
        return result
    return checked
