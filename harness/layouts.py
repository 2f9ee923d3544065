"""Memory formats of the trace inputs. Models run convolutions, pooling, normalisation and the
elementwise ops between them on channels-last tensors (NHWC in memory, NDHWC in 5-d); a kernel that
indexes its input as if contiguous is then wrong, and one that writes a contiguous result where
aten keeps the input's layout fails on strides. With ``channels_last`` the suite runs each such
trace input a second time in that layout (``harness.suite.build``); the first run is as traced.
"""
from __future__ import annotations

from dataclasses import replace

from bbagent.harness.traces import TensorSpec, TraceCall, map_leaves

# Prompt families (prompts/families.json) whose ops models feed channels-last tensors.
CHANNELS_LAST_FAMILIES = frozenset({"convolution", "pooling", "normalization", "elementwise_unary",
                                    "elementwise_binary"})


def channels_last_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a 4-d (N, C, H, W) or 5-d (N, C, D, H, W) tensor stored channels last."""
    strides = [0] * len(shape)
    strides[1] = 1
    step = max(shape[1], 1)
    for dim in range(len(shape) - 1, 1, -1):
        strides[dim] = step
        step *= max(shape[dim], 1)
    strides[0] = step
    return tuple(strides)


def _in_channels_last(spec: TensorSpec) -> TensorSpec:
    """A contiguous 4-d or 5-d tensor with more than one channel and some spatial extent, stored
    channels last (its strides then always differ from the contiguous ones); anything else as is."""
    if spec.stride is None and len(spec.shape) in (4, 5) and spec.shape[1] > 1 and any(s > 1 for s in spec.shape[2:]):
        return replace(spec, stride=channels_last_strides(spec.shape))
    return spec


def channels_last_call(call: TraceCall) -> TraceCall | None:
    """The call with every contiguous 4-d and 5-d tensor (more than one channel, some spatial
    extent) in channels-last layout; None where no tensor changes."""
    args = map_leaves(call.args, TensorSpec, _in_channels_last)
    kwargs = map_leaves(call.kwargs, TensorSpec, _in_channels_last)
    if args == call.args and kwargs == call.kwargs:
        return None
    return replace(call, args=args, kwargs=kwargs)
