"""A program's floor on the GPU: the roofline (``harness.timing.roofline``) of one call of a
reference module, its FLOPs counted per aten call as it runs once (``counted_flops``) and its least
bytes (inputs read once, outputs written once), against the card's ceilings measured here
(``device_ceilings``)."""
from __future__ import annotations

from bbagent.harness.inputs import tensors_in
from bbagent.harness.ops import packet_name
from bbagent.harness.timing.clock import copy_bandwidth_gbs, matmul_tflops
from bbagent.harness.timing.roofline import flops_of, roofline


def device_ceilings() -> tuple[float, dict[str, float]]:
    """This GPU's copy bandwidth in GB/s and matmul throughput per dtype name in TFLOP/s, measured now."""
    return copy_bandwidth_gbs(), matmul_tflops()


def floor_us(reference, inputs: tuple, copy_gbs: float, tflops: dict[str, float]) -> float:
    """The roofline's floor of one call of ``reference(*inputs)`` in microseconds: the larger of
    its bytes over the copy bandwidth and its FLOPs over the matmul throughput in the dtype of its
    first floating input, given the copy bandwidth in GB/s and the matmul throughput per dtype name
    in TFLOP/s."""
    flops, outputs = counted_flops(reference, inputs)
    moved = sum(t.numel() * t.element_size() for t in tensors_in((inputs, outputs)))
    return roofline(flops, moved, 1.0, copy_gbs, tflops.get(products_dtype(inputs)))["floor_ms"] * 1e3


def products_dtype(inputs) -> str:
    """The dtype whose matmul throughput bounds a program: its first floating input's ('' where none)."""
    floating = [t.dtype for t in tensors_in(inputs) if t.is_floating_point()]
    return str(floating[0]).removeprefix("torch.") if floating else ""


def counted_flops(reference, inputs) -> tuple[int, object]:
    """The FLOPs of one call of ``reference(*inputs)``, summed over the aten calls it makes
    (``harness.timing.roofline.flops_of``), and what the call returned."""
    import torch
    with torch.no_grad(), _flop_counter() as counted:
        outputs = reference(*inputs)
    return counted.flops, outputs


def _flop_counter():
    """A dispatch mode that adds up the FLOPs of each aten call under it but views
    (``harness.timing.roofline.flops_of``)."""
    from torch.utils._python_dispatch import TorchDispatchMode


    class FlopCount(TorchDispatchMode):
        flops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if getattr(func, "is_view", False):  # a view computes nothing
                return result
            self.flops += flops_of(packet_name(func), [tuple(t.shape) for t in tensors_in((args, kwargs))],
                                   [tuple(t.shape) for t in tensors_in(result)])
            return result
    return FlopCount()
