"""Serve the in-place and ``out=`` overloads of a family with a kernel written for the functional one.

A backend author writes ``relu`` once; ``relu_`` is ``relu`` written back into ``self`` and
``relu.out`` is ``relu`` written into ``out`` (resized first when its shape is wrong, as
aten's ``resize_output`` does). The write-back is a ``copy_``, which respects the
destination's strides and casts to its dtype; it costs one extra pass over the result, the
price of asking the model for one computation instead of three. These adapters are bbagent's
code, not the candidate's: they run with the guards paused, and the functional kernel they
call is tested on its own overload in the same evaluation. Whatever ``serving`` returns refuses a
result that is not plain data (``harness.plain``), checked on the kernel's own result before
an adapter copies it anywhere.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Literal

import torch
from torch.utils._python_dispatch import _disable_current_modes

from bbagent.harness.plain import plain_only
from bbagent.harness.ops import op_name
from bbagent.harness.variants import functional_of, is_written, out_arguments


class AdapterError(ValueError):
    """The kernel cannot serve this overload (it is written for another family's convention)."""


def convention(op) -> Literal["functional", "inplace", "out"]:
    """``functional``, ``inplace`` or ``out``: how ``op`` returns its result."""
    if out_arguments(op):
        return "out"
    if any(is_written(a) for a in op._schema.arguments):
        return "inplace"
    return "functional"


# The recordings of calls under way (``harness.checks.in_use.Recording``): bbagent's own write-back of a
# functional result into ``self`` or ``out=`` runs outside the dispatch modes that record a call, so
# it notes itself here, as the copy it is, for the recording to replay.
RECORDINGS: list[list] = []


def serving(kernel: Callable, written_for, target, traced: bool = False) -> Callable:
    """A callable with ``target``'s calling convention, from ``kernel`` written for ``written_for``:
    the kernel itself when they are the same overload; an adapter when ``written_for`` is the
    functional overload of ``target``'s family; otherwise ``AdapterError``. Either refuses a
    result that is not plain data (``NotPlainTensor``), except ``traced``: for torch.compile's
    tracing (``agent.serving.direct``), where every tensor is torch's traced tensor and the write-back
    is traced with the rest."""
    check_serves(written_for, target)
    if not traced:
        kernel = plain_only(kernel)
    if target is written_for:
        return kernel
    if convention(target) == "out":
        return _out_adapter(kernel, target, traced)
    return _inplace_adapter(kernel, target, traced)


def check_serves(written_for, target) -> None:
    """Raise ``AdapterError`` unless a kernel written for ``written_for`` can serve ``target``: the
    same overload, or the functional overload of ``target``'s family."""
    if target is written_for:
        return
    if convention(written_for) != "functional" or functional_of(target) is not written_for:
        raise AdapterError(f"a kernel written for {op_name(written_for)} cannot serve {op_name(target)}: only "
                           "the functional overload of a family is wrapped for its in-place and out= overloads")


def _inplace_adapter(kernel: Callable, target, traced: bool = False) -> Callable:
    """``target(*args)`` = ``kernel(*args)`` copied into the written argument, which is returned."""
    arguments = target._schema.arguments
    position = next(i for i, a in enumerate(arguments) if is_written(a))
    name = arguments[position].name

    def inplace(*args, **kwargs):
        result = kernel(*args, **kwargs)
        written = args[position] if position < len(args) else kwargs[name]
        _write(written, result, name, resize=False, traced=traced)
        return written
    inplace.__name__ = f"{target._schema.name.split('::')[-1]}_via_functional"
    return inplace


def _out_adapter(kernel: Callable, target, traced: bool = False) -> Callable:
    """``target(*args, out=...)`` = ``kernel(*args)`` written into ``out`` (resized to the
    result's shape where it differs); returns ``out`` (a tuple of them for several outputs)."""
    names = out_arguments(target)
    returns = len(target._schema.returns)

    def out_variant(*args, **kwargs):
        outs = [kwargs.pop(name) for name in names]
        result = kernel(*args, **kwargs)
        results = (result,) if len(names) == 1 else tuple(result)
        if len(results) != len(names):
            raise TypeError(f"the functional kernel returned {len(results)} values for {len(names)} out= arguments")
        for name, out, value in zip(names, outs, results):
            _write(out, value, name, resize=True, traced=traced)
        if returns == 0:
            return None
        return outs[0] if returns == 1 else tuple(outs)
    out_variant.__name__ = f"{target._schema.name.split('::')[-1]}_out_via_functional"
    return out_variant


def _write(destination, value, name: str, resize: bool, traced: bool = False) -> None:
    """Copy the functional result into ``destination`` (tensor or list of tensors); ``traced``: in
    the dispatch modes of torch.compile's tracing, which must see the copy."""
    if isinstance(destination, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(destination):
            raise TypeError(f"'{name}' holds {len(destination)} tensors; the functional kernel returned "
                            f"{type(value).__name__} of another length")
        for i, (d, v) in enumerate(zip(destination, value)):
            _write(d, v, f"{name}[{i}]", resize, traced)
        return
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"the functional kernel returned {type(value).__name__}, not a Tensor, for '{name}'")
    with nullcontext() if traced else _disable_current_modes():  # bbagent's own write-back, not the candidate's
        if destination.shape != value.shape:
            if not resize:
                raise RuntimeError(f"'{name}' has shape {list(destination.shape)} but the functional result has "
                                   f"shape {list(value.shape)}; the in-place overload cannot resize it")
            destination.resize_(value.shape)
        destination.copy_(value)
    if RECORDINGS:
        RECORDINGS[-1].append(("aten", torch.ops.aten.copy_.default, (destination, value), {}, destination))
