"""The reference computation of a test (aten's op as the harness calls it) and the one rule for an
exception out of any reference call: out of device memory is retried, a CUDA error ends the
evaluation as the reference's fault, anything else is the reference refusing the input.
"""
from __future__ import annotations

import torch

from bbagent.harness.ops import packet_name


class ReferenceFault(RuntimeError):
    """The reference (not the candidate) broke the device; the evaluation cannot go on."""


def reference_refused(exc: Exception, what: str) -> None:
    """The one rule for an exception out of a reference computation (aten's op, the functional
    overload written as the overload writes, the float64 runs), used at every such call: out of
    device memory is raised again (the test is run again once memory is free); a CUDA error ends
    the evaluation as the reference's fault (``ReferenceFault``: the context is lost, no later test
    could run); anything else returns, for the caller to record as the reference refusing this input."""
    if out_of_memory(exc):
        raise exc
    if is_cuda_error(exc):
        raise ReferenceFault(f"{what} hit a CUDA error: {str(exc).splitlines()[0]}; the CUDA context is lost, "
                             "the remaining tests cannot run") from exc


def out_of_memory(exc: BaseException) -> bool:
    """CUDA ran out of device memory: on a shared GPU, often another evaluation's doing. Never read
    as "the op refuses this input": the caller retries once memory is free (``harness.sandbox.child.device_memory``)."""
    return isinstance(exc, torch.OutOfMemoryError)


def is_cuda_error(exc: BaseException) -> bool:
    """A CUDA runtime error (illegal address, device-side assert): the context is unusable after it."""
    return type(exc).__name__ == "AcceleratorError" or "CUDA error" in str(exc)


# On a GPU aten runs these through cuDNN, which plans each new shape at its first call in a process
# (0.01-1 s a shape on the H200: 34 of the 37 s the references of convolution's 1944 tests took,
# benchmarks/reference_cost.py); aten's own CUDA kernels need no plan, and compute float32 without
# TF32. References only: the candidate's calls and the timing phase's eager baseline keep cuDNN.
PLANNED_BY_CUDNN = frozenset({"convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                              "conv_transpose3d", "convolution_backward"})


def reference_call(op, args: tuple, kwargs: dict):
    """``op(*args, **kwargs)`` computed as a reference: a convolution without cuDNN (``PLANNED_BY_CUDNN``),
    or with it where aten has no kernel of its own for the input."""
    if isinstance(op, torch._ops.OpOverload) and packet_name(op) in PLANNED_BY_CUDNN and torch.backends.cudnn.enabled:
        try:
            with torch.backends.cudnn.flags(enabled=False):
                return op(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - aten's own kernels refuse it (or need more memory): cuDNN's turn
            if is_cuda_error(exc):
                raise
    return op(*args, **kwargs)
