"""The roofline of one timed shape: the floating-point operations and the least bytes it needs,
which ceiling bounds it, and how close a timing came to that ceiling.

The two ceilings are measured on the GPU in use (``harness.timing.phase.device_stats``): the copy
bandwidth (a large ``copy_``) and the matmul throughput per dtype (a large ``torch.mm``). A shape's
floor is the larger of bytes / bandwidth and FLOPs / throughput; its ``bound`` is the ceiling that
sets the floor, and ``roof_fraction`` = floor / time (1.0: at the ceiling). Without a matmul
throughput for the dtype (integers, float64), only the bandwidth counts.

FLOPs (a multiply-add counts 2): matrix products and convolutions exactly, from their shapes;
attention as its two products; everything else as a per-element count times the largest tensor
(1 per element, more for the ops listed in ``PER_ELEMENT``): for those the bandwidth is the bound
on any real shape, and the count only has to be of the right size.
"""
from __future__ import annotations

import math

# packet name -> index of the left matrix among the op's tensors (the bias comes first in add*)
MATRIX_PRODUCTS = {"mm": 0, "bmm": 0, "matmul": 0, "linear": 0, "mv": 0, "dot": 0, "vdot": 0, "_int_mm": 0,
                   "_scaled_mm": 0, "addmm": 1, "baddbmm": 1, "addmv": 1, "addbmm": 1}
CONVOLUTIONS = frozenset({"convolution", "_convolution", "cudnn_convolution", "conv1d", "conv2d", "conv3d",
                          "cudnn_convolution_transpose", "conv_transpose1d", "conv_transpose2d",
                          "conv_transpose3d"})
ATTENTION = frozenset({"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                       "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                       "_flash_attention_forward", "_efficient_attention_forward"})
PER_ELEMENT = {"_softmax": 5, "softmax": 5, "_log_softmax": 5, "log_softmax": 5, "native_layer_norm": 8,
               "layer_norm": 8, "native_group_norm": 8, "group_norm": 8, "native_batch_norm": 8,
               "_native_batch_norm_legit": 8, "_native_batch_norm_legit_no_training": 8, "rms_norm": 6,
               "_fused_rms_norm": 6, "gelu": 8, "silu": 4, "sigmoid": 4, "tanh": 4, "exp": 1, "erf": 8}


def _numel(shape) -> int:
    return math.prod(shape)


def flops_of(name: str, inputs: list[tuple], outputs: list[tuple], transposed: bool = False) -> int:
    """FLOPs of the op ``name`` (its packet name, e.g. ``mm``) on tensors of these shapes, in
    argument order (``inputs``) and result order (``outputs``)."""
    if name in MATRIX_PRODUCTS:
        left = MATRIX_PRODUCTS[name]
        a, b = inputs[left], inputs[left + 1]
        if name == "addbmm":  # a batch of products summed into one [M, N]
            return 2 * _numel(a) * b[-1]
        return 2 * _numel(outputs[0]) * a[-1]
    if name in CONVOLUTIONS:
        weight = inputs[1]
        per_output = _numel(weight[1:])  # (input channels / groups) x kernel
        if transposed or "transpose" in name:  # every input element meets (out channels / groups) x kernel
            return 2 * _numel(inputs[0]) * per_output
        return 2 * _numel(outputs[0]) * per_output
    if name in ATTENTION:
        query, key, value = inputs[:3]
        return 2 * _numel(query) * key[-2] + 2 * _numel(query[:-1]) * key[-2] * value[-1]
    largest = max((_numel(s) for s in inputs + outputs), default=0)
    return PER_ELEMENT.get(name, 1) * largest


def roofline(flops: int, bytes_moved: int, seconds: float, copy_gbs: float, matmul_tflops: float | None) -> dict:
    """Where one timing sits: its intensity, the bound (``memory`` or ``compute``), the floor
    time, and ``roof_fraction`` = floor / time."""
    memory_s = bytes_moved / (copy_gbs * 1e9)
    compute_s = flops / (matmul_tflops * 1e12) if matmul_tflops else 0.0
    floor_s = max(memory_s, compute_s)
    return {"flops": int(flops), "intensity": flops / bytes_moved if bytes_moved else None,
            "bound": "compute" if compute_s > memory_s else "memory", "floor_ms": floor_s * 1e3,
            "roof_fraction": floor_s / seconds if seconds > 0 else None,
            "achieved_tflops": flops / seconds / 1e12 if seconds > 0 else None}


def timed_roofline(flops: int, bytes_moved: int, copy_gbs: float, matmul_tflops: float | None, candidate_ms: float,
                   aten_ms: float) -> dict:
    """A timing record's roofline fields (``harness.verdict.TimedTest``): the FLOPs, the bound, the
    floor time, and the fractions of it that the kernel and eager reached."""
    mine, eager = (roofline(flops, bytes_moved, ms * 1e-3, copy_gbs, matmul_tflops) for ms in (candidate_ms, aten_ms))
    return {"flops": mine["flops"], "bound": mine["bound"], "floor_ms": mine["floor_ms"],
            "roof_fraction": mine["roof_fraction"], "aten_roof_fraction": eager["roof_fraction"],
            "candidate_tflops": mine["achieved_tflops"]}
