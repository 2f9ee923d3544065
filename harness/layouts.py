"""Memory formats of the trace inputs. Models run convolutions, pooling, normalisation and the
elementwise ops between them on channels-last tensors (NHWC in memory, NDHWC in 5-d); a kernel that
indexes its input as if contiguous is then wrong, and one that writes a contiguous result where
aten keeps the input's layout fails on strides. With ``channels_last`` the suite runs each such
trace input a second time in that layout (``harness.suite.build``); the first run is as traced.
"""
from __future__ import annotations

from dataclasses import replace

from harness.traces import TensorSpec, TraceCall

# Prompt families (prompts/families.json) whose ops models feed channels-last tensors.
CHANNELS_LAST_FAMILIES = frozenset({"convolution", "pooling", "normalization", "elementwise_unary",
                                    "elementwise_binary"})


def channels_last_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a 4-d (N, C, H, W) or 5-d (N, C, D, H, W) tensor stored channels last."""
    n, c, *spatial = shape
    strides = [0] * len(shape)
    step = 1
    strides[1] = step
    step *= max(c, 1)
    for dim in range(len(shape) - 1, 1, -1):
        strides[dim] = step
        step *= max(shape[dim], 1)
    strides[0] = step
    return tuple(strides)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _in_channels_last(value):
    if isinstance(value, TensorSpec):
        if value.stride is None and len(value.shape) in (4, 5) and value.shape[1] > 1 \
                and any(size > 1 for size in value.shape[2:]):
            strides = channels_last_strides(value.shape)
            if strides != _contiguous_strides(value.shape):
                return replace(value, stride=strides)
        return value
    if isinstance(value, tuple):
        return tuple(_in_channels_last(v) for v in value)
    if isinstance(value, list):
        return [_in_channels_last(v) for v in value]
    if isinstance(value, dict):
        return {k: _in_channels_last(v) for k, v in value.items()}
    return value


def channels_last_call(call: TraceCall) -> TraceCall | None:
    """The call with every contiguous 4-d and 5-d tensor (more than one channel, some spatial
    extent) in channels-last layout; None where no tensor changes."""
    args, kwargs = _in_channels_last(call.args), _in_channels_last(call.kwargs)
    if args == call.args and kwargs == call.kwargs:
        return None
    return replace(call, args=args, kwargs=kwargs)
