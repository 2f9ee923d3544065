"""``bbagent regions``: a real model's candidate regions, each written as a program problem.

The model is built as ``check-model`` builds it (``agent.models``: a config, a fixed seed,
no downloaded weights), compiled once by ``torch.compile`` on the device asked for, its graphs
searched (``agent.regions.extract``), and each region of a distinct hash written to
``OUT/<n>_<kind>_<hash>.py`` (``agent.regions.program``), most frequent first: a file
``generate --problem``, ``eval --problem`` and ``batch --kernelbench OUT`` take as they are. On a
GPU each region's share of the compiled model's GPU time is measured (``agent.regions.share``).
"""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bbagent.agent.errors import UsageError
from bbagent.agent.models import build_model, build_program
from bbagent.agent.regions.extract import Region, inductor_graphs
from bbagent.agent.regions.program import region_program
from bbagent.agent.regions.share import measure_shares
from bbagent.agent.regions.spanning import find_regions
from bbagent.harness.interface import ProblemError


class RegionSurvey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str  # a built-in model's name, or a script's file name without .py
    config: dict
    script: str | None = None  # the program file the model came from (``--script``)
    device: str
    dtype: str
    graphs: int
    backward: bool = False  # the training graphs searched, forward and backward (no time shares then)
    gpu_us: float | None  # the compiled model's GPU time per forward (``agent.regions.share``); None on a CPU
    regions: list[Region]
    files: list[str]  # one problem file per region, in the same order


def survey(model: str, config: dict, device: str, dtype: str, out: Path, script: Path | None = None,
           backward: bool = False) -> RegionSurvey:
    """The regions of ``model`` built from ``config`` (or of the program file ``script``, then
    named ``model``), their problems written under ``out``. A ``UsageError`` where ``out`` cannot
    be written, the script is not a program, or the model cannot run with these settings. A folder
    ``out`` made here is removed again when the survey fails before writing into it."""
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: the problems cannot be written there ({exc.strerror or exc})") from None
    try:
        return _surveyed(model, config, device, dtype, out, script, backward)
    except BaseException:
        if made and not any(out.iterdir()):
            out.rmdir()
        raise


def _surveyed(model: str, config: dict, device: str, dtype: str, out: Path, script: Path | None,
              backward: bool) -> RegionSurvey:
    import torch
    try:
        if script is not None:
            built, inputs = build_program(script, device, getattr(torch, dtype))
        else:
            built, one_input = build_model(model, config, device, getattr(torch, dtype))
            inputs = (one_input,)
        with torch.no_grad():
            built(*inputs)  # settings that do not fit together (heads not dividing d_model) fail here, eagerly
    except ProblemError as exc:
        raise UsageError(f"--script: {exc}") from None
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the model's own code (a script's, or settings that do not fit)
        settings = f"the settings {config}" if script is None else "its own get_inputs()"
        raise UsageError(f"{model} does not run with {settings}: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    graphs = inductor_graphs(built, inputs, backward)
    regions = find_regions(graphs)
    files = []
    for number, region in enumerate(regions, start=1):
        path = out / f"{number}_{re.sub(r'[^a-z]+', '_', region.kind.lower())}_{region.hash}.py"
        path.write_text(region_program(region, f"{model} {config}" if script is None else model))
        files.append(str(path))
    gpu_us = None if backward else measure_shares(built, inputs, regions, files, device)
    return RegionSurvey(model=model, config=config, script=str(script) if script else None, device=device, dtype=dtype,
                        graphs=len(graphs), backward=backward, gpu_us=gpu_us, regions=regions, files=files)
