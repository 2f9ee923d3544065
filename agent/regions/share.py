"""How much of a compiled model's GPU time each region takes, measured on the GPU.

The model compiled by ``torch.compile`` and each region's problem compiled alone on the region's
own shapes are run under the torch profiler (``harness.timing.profile``); a region's share is its
GPU time per call (kernels, copies, memsets) times how often it occurs, over the model's GPU time
per forward. Compiled alone, a region may be fused a little differently than inside the model, so
the share is an estimate; shares need not add up to 100% (the model's other work, regions that
overlap in what inductor fuses). On the CPU nothing is measured: the interpreter's time says
nothing about the GPU's.
"""
from __future__ import annotations

from pathlib import Path

from bbagent.agent.regions.extract import Region


def measure_shares(model, inputs: tuple, regions: list[Region], files: list[str], device: str) -> float | None:
    """The model's GPU microseconds per forward under ``torch.compile``, each region's own
    (``Region.gpu_us``) and its share (``Region.share``) set; None on a CPU, where none is set."""
    if device != "cuda":
        return None
    import torch
    model_us = _gpu_us(torch.compile(model), inputs)
    for region, file in zip(regions, files):
        region.gpu_us = _region_us(Path(file), device)
        region.share = region.count * region.gpu_us / model_us if model_us > 0 else None
    return model_us


def _region_us(file: Path, device: str) -> float:
    import torch
    from bbagent.harness.interface import ProgramProblem, program_module
    module = program_module(ProgramProblem(path=str(file.resolve()), text=file.read_text()))
    inputs = tuple(value.to(device) for value in module.get_inputs())
    return _gpu_us(torch.compile(module.Model(*module.get_init_inputs()).to(device)), inputs)


def _gpu_us(compiled, inputs: tuple) -> float:
    """GPU microseconds of one call of ``compiled(*inputs)``: its kernels, copies and memsets."""
    import torch
    from bbagent.harness.interface import profile_sides

    def call():
        with torch.no_grad():
            return compiled(*inputs)
    return sum(row["us"] for row in profile_sides({"call": call}, "region", None)[1]["call"])
