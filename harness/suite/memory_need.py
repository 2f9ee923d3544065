"""What an evaluation is expected to need of a shared GPU's memory before its suite exists
(``harness.sandbox.parent.gpu_share`` admits evaluations by it; once a child of the operator has run, its
measured peak replaces this guess).

The suite's largest tensors are its trace inputs (OpInfo samples are small), and the traces say
their shapes and dtypes: the largest call's tensor bytes, times the copies a test keeps alive at
once (the kernel's inputs and result, the reference's inputs and result, the inputs drawn again,
the comparison's float64 chunks), plus what a child holds whatever the tests (its CUDA context, the
allocator's cache kept between tests).
"""
from __future__ import annotations

import torch

from bbagent.harness.traces import TraceCall, TraceFormatError, load_calls, parse_call_line

COPIES_ALIVE = 8  # of the largest call's tensors, at the worst moment of its test
CHILD_BASE_BYTES = 3 << 30  # the context, Triton's and torch's own, the allocator's cache kept


def largest_call_bytes(overloads: list[str], extra_traces: dict[str, list[dict]] | None = None) -> int:
    """The bytes of the tensors of the largest trace call of any of ``overloads`` (a dataset's own
    inputs included); 0 where no trace says."""
    calls: list[TraceCall] = []
    for name in overloads:
        calls += load_calls(name)
        for extra in (extra_traces or {}).get(name, []):
            try:
                calls.append(parse_call_line(name, extra["line"]))
            except (TraceFormatError, KeyError, TypeError):
                continue
    return max((sum(spec.numel() * _itemsize(spec.dtype) for spec in call.tensor_specs()) for call in calls), default=0)


def expected_need(overloads: list[str], extra_traces: dict[str, list[dict]] | None = None) -> int:
    return COPIES_ALIVE * largest_call_bytes(overloads, extra_traces) + CHILD_BASE_BYTES


def program_need(tensors: list[tuple[list[int], str]]) -> int:
    """``expected_need`` for a program from its tensors' (shape, dtype): inputs, outputs, weights."""
    total = 0
    for shape, dtype in tensors:
        count = 1
        for size in shape:
            count *= size
        total += count * _itemsize(dtype)
    return COPIES_ALIVE * total + CHILD_BASE_BYTES


def _itemsize(dtype: str) -> int:
    found = getattr(torch, dtype.removeprefix("torch."), None)
    return found.itemsize if isinstance(found, torch.dtype) else 8
