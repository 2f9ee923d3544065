"""``bbagent regions``: a real model's candidate regions, each written as a program problem.

The model is built as ``check-model`` builds it (``agent.models``: a config, a fixed seed,
no downloaded weights), compiled once by ``torch.compile`` on the device asked for, its graphs
searched (``agent.regions.extract``), and each region of a distinct hash written to
``OUT/<n>_<kind>_<hash>.py`` (``agent.regions.program``), most frequent first: a file
``generate --problem``, ``eval --problem`` and ``batch --kernelbench OUT`` take as they are.
"""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bbagent.agent.regions.extract import Region, find_regions, inductor_graphs
from bbagent.agent.regions.program import region_program


class RegionSurvey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    config: dict
    device: str
    dtype: str
    graphs: int
    regions: list[Region]
    files: list[str]  # one problem file per region, in the same order


def survey(model: str, config: dict, device: str, dtype: str, out: Path) -> RegionSurvey:
    """The regions of ``model`` built from ``config``, their problems written under ``out``. A
    ``UsageError`` where ``out`` cannot be written or the model cannot run with these settings."""
    import torch
    from bbagent.agent.errors import UsageError
    from bbagent.agent.models import build_model
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: the problems cannot be written there ({exc.strerror or exc})") from None
    try:
        built, inputs = build_model(model, config, device, getattr(torch, dtype))
        with torch.no_grad():
            built(inputs)  # settings that do not fit together (heads not dividing d_model) fail here, eagerly
    except (RuntimeError, AssertionError, ValueError) as exc:
        raise UsageError(f"{model} does not run with the settings {config}: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    graphs = inductor_graphs(built, (inputs,))
    regions = find_regions(graphs)
    files = []
    for number, region in enumerate(regions, start=1):
        path = out / f"{number}_{re.sub(r'[^a-z]+', '_', region.kind)}_{region.hash}.py"
        path.write_text(region_program(region, f"{model} {config}"))
        files.append(str(path))
    return RegionSurvey(model=model, config=config, device=device, dtype=dtype, graphs=len(graphs), regions=regions,
                        files=files)
