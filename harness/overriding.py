"""One aten overload answered by a served kernel for one dispatch key, through ``torch.library``
(``agent.serving.enable`` registers bbagent's approved kernels with it, and so does the loader an
exported package carries, ``harness.packaged``).

Registered wrapped so that:

* the original aten kernel (``torch.library.get_kernel``, taken before the override) runs instead
  for inputs the kernel was not tested on (a leading dtype outside those it was tested on) and
  where the kernel raises an ordinary exception (a CUDA error is re-raised: the context is lost,
  nothing can fall back);
* a kernel that calls back into the overload it replaces gets the original, never itself (a
  per-thread re-entrancy guard);
* every call is counted (``Counted``): served by the kernel, or fallen back and why (with the
  exception's own message where the kernel raised).

Imports torch and the standard library only: an exported package runs it without bbagent.
"""
from __future__ import annotations

import threading
import warnings
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import torch

from bbagent.harness.checks.reference import is_cuda_error
from bbagent.harness.inputs import tensors_in
from bbagent.harness.ops import tensor_arguments


class Counts(Protocol):
    """Where an override counts its calls: those the kernel answered, and those left to aten, by why."""
    calls: int
    fallbacks: Counter


@dataclass
class Counted:
    """The calls one served overload answered, and those it left to aten, by why."""
    calls: int = 0
    fallbacks: Counter = field(default_factory=Counter)


_I = TypeVar("_I", bound="Installed")


class Installed:
    """What one enable installed: an ``aten`` IMPL ``library`` and what compiled code was given
    (``compiled``: anything with ``uninstall()``), undone together by ``disable``; a context manager
    (leaving the block disables it)."""
    library: Any = None
    compiled: Any = None

    @property
    def active(self) -> bool:
        return self.library is not None

    def disable(self) -> None:
        if self.compiled is not None:
            self.compiled.uninstall()
            self.compiled = None
        if self.library is not None:
            self.library._destroy()
            self.library = None
        self.forget()

    def forget(self) -> None:
        """Called when disabled: where the enable keeps the current one, it lets go of it here."""

    def __enter__(self: _I) -> _I:
        return self

    def __exit__(self, *exc) -> None:
        self.disable()


def override(library, overload, function: Callable, dtypes: Collection, dispatch_key: str, counted: Counts) -> None:
    """Register ``function`` (with ``overload``'s calling convention) in ``library`` (an ``aten``
    IMPL library) as ``overload``'s kernel for ``dispatch_key``, wrapped as the module says;
    ``dtypes``: the leading dtypes it serves (empty: any)."""
    original = torch.library.get_kernel(overload, dispatch_key)
    keyset = torch._C.DispatchKeySet(dispatch_key)  # type: ignore[arg-type]  # a key's name is taken too
    guard = threading.local()
    positions = tensor_arguments(overload)

    def fallback(reason: str, args, kwargs):
        counted.fallbacks[reason] += 1
        args, kwargs = numbers_as_tensors(args, kwargs, positions)
        return original.call_boxed(keyset, *args, **kwargs)

    def implementation(*args, **kwargs):
        if getattr(guard, "inside", False):
            return fallback("re-entered: the kernel called its own overload", args, kwargs)
        tensors = tensors_in((args, kwargs))
        dtype = tensors[0].dtype if tensors else None
        if dtypes and dtype is not None and dtype not in dtypes:
            return fallback(f"dtype {str(dtype).removeprefix('torch.')} not tested", args, kwargs)
        guard.inside = True
        try:
            result = function(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - an input the kernel does not support: aten answers
            if is_cuda_error(exc):
                raise
            return fallback(f"kernel raised {in_words(exc)}", args, kwargs)
        finally:
            guard.inside = False
        counted.calls += 1
        return result

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        library.impl(library_name(overload), implementation, dispatch_key)


def dtypes_named(names: Collection[str]) -> set:
    """The torch dtypes of these names (``float32``); names this torch lacks are dropped."""
    return {getattr(torch, name) for name in names if isinstance(getattr(torch, name, None), torch.dtype)}


def in_words(exc: BaseException) -> str:
    """``Type: the message's first line`` (the type alone where it says nothing), at most 200 characters."""
    lines = str(exc).strip().splitlines()
    return (f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__)[:200]


def numbers_as_tensors(args: tuple, kwargs: dict, tensor_arguments) -> tuple[tuple, dict]:
    """A Python kernel receives a wrapped number (``x + 0.5``) as a Python number, but aten's boxed
    kernel wants a Tensor there: give it a 0-dim tensor of the dtype a wrapped number has (the
    default float dtype for floats, int64, bool, complex), so type promotion comes out the same
    (except when every operand is 0-dim)."""
    positions, names = tensor_arguments

    def as_tensor(value):
        if isinstance(value, bool):
            return torch.tensor(value)
        if isinstance(value, (int, float, complex)):
            return torch.tensor(value, dtype=torch.int64 if isinstance(value, int) else None)
        return value
    args = tuple(as_tensor(a) if i in positions else a for i, a in enumerate(args))
    kwargs = {k: as_tensor(v) if k in names else v for k, v in kwargs.items()}
    return args, kwargs


def library_name(overload) -> str:
    """``aten.relu.default`` -> ``relu``, ``aten.add.out`` -> ``add.out`` (torch.library's spelling)."""
    name = overload._schema.name.split("::")[-1]
    return name if overload._overloadname == "default" else f"{name}.{overload._overloadname}"
