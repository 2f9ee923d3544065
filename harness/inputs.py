"""Turn trace argument descriptions into seeded tensors on a device.

Floating tensors are signed and varied (normal values with a spread of
magnitudes and some exact zeros), never uniform [0, 1): an identity "relu" must
not pass by accident. Strided specs are honoured with ``as_strided`` over a
buffer just large enough for the strides.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from bbagent.harness.traces import DtypeRef, NamedConstant, TensorSpec, describe_value, map_leaves


def memory_span(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements of memory a strided view covers (0 for a zero-size view)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def memory_behind(t: torch.Tensor) -> torch.Tensor:
    """The flat memory a (possibly broadcast, stride-0) view covers, as a 1-D view of it."""
    return t.as_strided((memory_span(tuple(t.shape), t.stride()),), (1,), t.storage_offset())


def copy_into(destination: Any, source: Any) -> None:
    """Each tensor of ``source`` copied into the same place of ``destination`` (same structure),
    memory and all: a broadcast (stride-0) view's memory too, which an element-wise copy refuses."""
    for dst, src in zip(tensors_in(destination), tensors_in(source)):
        memory_behind(dst).copy_(memory_behind(src))


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """Apply ``fn`` to every tensor in a structure of tuples, lists and dicts."""
    return map_leaves(value, torch.Tensor, fn)


def flat_values(value: Any) -> list:
    """The values of a structure of tuples and lists, in order, flattened (tensors and others alike)."""
    if isinstance(value, (list, tuple)):
        return [item for part in value for item in flat_values(part)]
    return [value]


def tensors_in(value: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    map_tensors(value, found.append)
    return found


def make_tensor(spec: TensorSpec, device: str, gen: torch.Generator | None) -> torch.Tensor:
    """Seeded values for ``spec`` on ``device``; on the ``meta`` device, shapes only."""
    dtype = getattr(torch, spec.dtype)
    if device == "meta":
        stride = spec.stride if spec.stride is not None else torch.empty(spec.shape, device="meta").stride()
        return torch.empty_strided(spec.shape, stride, dtype=dtype, device="meta")
    if spec.stride is None:
        return _values(spec.shape, dtype, device, gen)
    buffer = _values((memory_span(spec.shape, spec.stride),), dtype, device, gen)
    return buffer.as_strided(spec.shape, spec.stride)


# Decades of magnitude either side of 1 in drawn floating values. float16 gets one decade:
# with two, a float16 matmul over K = 4096 has a typical result of ~1.3e5, beyond float16's
# 65504, so most outputs were infinities and the test checked little else (with one: ~2e3).
# Large magnitudes are tested on their own by the "large" edge case.
DEFAULT_SPREAD = 2
FLOAT16_SPREAD = 1


def _values(shape: tuple[int, ...], dtype: torch.dtype, device: str,
            gen: torch.Generator | None) -> torch.Tensor:
    """Values drawn on ``device`` itself (``gen`` lives there): large trace inputs stay fast."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen, device=device).bool()
    if not (dtype.is_floating_point or dtype.is_complex):
        return torch.randint(-8, 9, shape, generator=gen, device=device).to(dtype)
    base = torch.randn(shape, generator=gen, dtype=torch.float32, device=device)
    # A spread of magnitudes (about 1e-2 .. 1e2; 1e-1 .. 1e1 in float16) and ~3% exact zeros.
    spread = FLOAT16_SPREAD if dtype == torch.float16 else DEFAULT_SPREAD
    scale = torch.pow(10.0, torch.randint(-spread, spread + 1, shape, generator=gen, device=device).float())
    zeros = torch.rand(shape, generator=gen, device=device) < 0.03
    return torch.where(zeros, torch.zeros_like(base), base * scale).to(dtype)


def materialize(value: Any, device: str, gen: torch.Generator | None) -> Any:
    """Replace every TensorSpec / DtypeRef in a parsed trace value by real objects."""
    if isinstance(value, TensorSpec):
        return make_tensor(value, device, gen)
    if isinstance(value, DtypeRef):
        return getattr(torch, value.name)
    if isinstance(value, NamedConstant):
        return getattr(torch, value.name.removeprefix("torch."))
    if isinstance(value, tuple):
        return tuple(materialize(v, device, gen) for v in value)
    if isinstance(value, list):
        return [materialize(v, device, gen) for v in value]
    if isinstance(value, dict):
        return {k: _device_kwarg(k, materialize(v, device, gen), device) for k, v in value.items()}
    return value


def _device_kwarg(key: str, value: Any, device: str) -> Any:
    """Traces were recorded on CUDA; a ``device=`` argument follows the evaluation device."""
    if key == "device" and isinstance(value, str):
        return device
    return value


def _spec_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return TensorSpec(tuple(value.shape), str(value.dtype).removeprefix("torch."),
                          None if value.is_contiguous() else tuple(value.stride()))
    return value


def describe_runtime(value: Any) -> str:
    """Short description of real arguments: ``T([64, 256], f16, stride=(1, 64))``."""
    return describe_value(value, leaf=_spec_of)


def describe_call(args: tuple, kwargs: dict) -> str:
    """``(T([4], f16), 2) {alpha=1}``: positional arguments, then keyword arguments if any."""
    text = describe_runtime(tuple(args))
    return text + (f" {describe_runtime(kwargs)}" if kwargs else "")


def poisoned_like(t: torch.Tensor) -> torch.Tensor:
    """An output buffer shaped like ``t`` and filled with values no correct kernel leaves behind
    (NaN, the smallest integer, True), so a kernel that never writes ``out`` is caught."""
    if t.dtype.is_floating_point or t.dtype.is_complex:
        fill = float("nan")
    elif t.dtype == torch.bool:
        fill = True
    else:
        fill = torch.iinfo(t.dtype).min
    return torch.full(t.shape, fill, dtype=t.dtype, device=t.device)


def poison_freed_memory(like: list[torch.Tensor], copies: int = 2) -> None:
    """Fill the allocator's recently freed blocks of these sizes with poison, so that a
    candidate's fresh ``torch.empty`` cannot come back holding an earlier result (an earlier
    test's, or the timing's). Allocating blocks of the same sizes takes exactly the blocks a
    candidate would get; a test poisons those of its inputs' sizes, which an elementwise result
    shares. (The test's own reference runs only after the candidate: ``checks.case.run_case``.)
    Where the device runs out of memory first, no freed block of that size is left unpoisoned (the
    allocator hands out its cached blocks before it fails), so poisoning stops there."""
    _fill_freed_memory(like, copies, poisoned_like)


def leave_in_freed_memory(values: list[torch.Tensor], copies: int = 2) -> None:
    """The opposite of ``poison_freed_memory``: the allocator's next blocks of these tensors' sizes
    hold these tensors' values (an earlier call's result, for a check that a kernel does not take
    memory that looks like the answer for the answer)."""
    _fill_freed_memory(values, copies, lambda t: t.clone())


def _fill_freed_memory(like: list[torch.Tensor], copies: int, filled: Callable[[torch.Tensor], torch.Tensor]) -> None:
    sizes = {(tuple(t.shape), t.dtype, t.device): t for t in like}  # one block per size is the one handed out next
    held = []
    try:
        for t in sizes.values():
            for _ in range(copies):
                held.append(filled(t))
    except torch.OutOfMemoryError:
        pass  # see poison_freed_memory: every cached block of these sizes is held, filled
    del held


def clone_value(value: Any) -> Any:
    """Deep copy of an argument structure; tensors keep shape, strides and dtype."""
    return map_tensors(value, _clone_tensor)


def _clone_tensor(t: torch.Tensor) -> torch.Tensor:
    if any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride())):
        # Broadcast (stride-0) layouts, common in traces, cannot be written element-wise:
        # copy the memory behind the view and rebuild the same view over the copy.
        return memory_behind(t).clone().as_strided(t.shape, t.stride())
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def spread(count: int, most: int) -> set[int] | range:
    """Positions of ``most`` of ``count`` items spread evenly from first to last: the traces
    of one op run through a model in order, so the first few are often alike (dropout rates
    0.52, 0.54, ... of one network's stochastic depth) while the list as a whole varies."""
    if count <= most:
        return range(count)
    return {round(k * (count - 1) / max(most - 1, 1)) for k in range(most)}
