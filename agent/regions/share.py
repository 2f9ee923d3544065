"""How much of a compiled model's GPU time each region takes, measured on the GPU.

The model compiled by ``torch.compile`` and each region's problem compiled alone on the region's
own shapes are run under the torch profiler (``harness.timing.profile``); a region's share is its
GPU time per call (kernels, copies, memsets) times how often it occurs, over the model's GPU time
per forward. Compiled alone, a region may be fused a little differently than inside the model, so
the share is an estimate; shares need not add up to 100% (the model's other work, regions that
overlap in what inductor fuses). On the CPU nothing is measured: the interpreter's time says
nothing about the GPU's.

Beside its time, each region's floor (``Region.floor_us``, the roofline of ``harness.timing.roofline``):
the larger of the least bytes it must move (its inputs read once, its outputs written once) over
the card's copy bandwidth, and its FLOPs (counted per aten call of the reference, run once) over
the card's matmul throughput in the region's dtype, both measured once per survey. A region whose
compiled time is far above its floor is where an answer can win; one at its floor is not.
"""
from __future__ import annotations

from pathlib import Path

from bbagent.agent.regions.extract import Region
from bbagent.harness.interface import ProgramProblem, device_ceilings, floor_us, profile_sides, program_module


def measure_shares(model, inputs: tuple, regions: list[Region], files: list[str], device: str) -> float | None:
    """The model's GPU microseconds per forward under ``torch.compile``, each region's own
    (``Region.gpu_us``) and its share (``Region.share``) set; None on a CPU, where none is set."""
    if device != "cuda":
        return None
    import torch
    model_us = _gpu_us(torch.compile(model), inputs)
    ceilings = device_ceilings()
    for region, file in zip(regions, files):
        region.gpu_us, region.floor_us = _region_us(Path(file), device, *ceilings)
        region.share = region.count * region.gpu_us / model_us if model_us > 0 else None
    return model_us


def _region_us(file: Path, device: str, copy_gbs: float, tflops: dict[str, float]) -> tuple[float, float]:
    """The region's GPU microseconds per call compiled alone, and its floor (module docstring)."""
    import torch
    module = program_module(ProgramProblem(path=str(file.resolve()), text=file.read_text()))
    inputs = tuple(value.to(device) for value in module.get_inputs())
    reference = module.Model(*module.get_init_inputs()).to(device)
    return _gpu_us(torch.compile(reference), inputs), floor_us(reference, inputs, copy_gbs, tflops)


def _gpu_us(compiled, inputs: tuple) -> float:
    """GPU microseconds of one call of ``compiled(*inputs)``: its kernels, copies and memsets."""
    import torch

    def call():
        with torch.no_grad():
            return compiled(*inputs)
    return sum(row["us"] for row in profile_sides({"call": call}, "region", None)[1]["call"])
