"""A region as a program problem in KernelBench's format (``harness.problem.ProgramProblem``): a
``Model`` without weights whose ``forward`` makes the region's aten calls in order on its inputs
(the region's weights and activations alike) and returns its outputs, ``get_inputs()`` drawing
inputs of the region's shapes and dtypes, ``get_init_inputs()`` empty. ``generate --problem``,
``eval``, ``bench`` and review take the file unchanged.
"""
from __future__ import annotations

from bbagent.agent.regions.extract import Region, TensorSpec


def region_program(region: Region, found_in: str) -> str:
    """The problem's text for ``region``, found in ``found_in`` (a model's name, for the docstring)."""
    names = [f"in{j}" for j in range(len(region.inputs))]
    body = [f"        r{i} = {_call(node.target, node.args, node.kwargs)}" for i, node in enumerate(region.nodes)]
    returned = ", ".join(f"r{i}" for i in region.output_nodes)
    if len(region.output_nodes) > 1:
        returned = f"({returned})"
    draws = ",\n        ".join(_draw(spec) for spec in region.inputs)
    return f'''import torch
import torch.nn as nn

REGION_HASH = "{region.hash}"  # bbagent serves an approved answer where torch.compile's graph holds this region
REGION_KIND = "{region.kind}"


class Model(nn.Module):
    """{_article(region.kind)} {region.kind} region of {found_in} (hash {region.hash}, found {region.count} time(s)), as
    the graph torch.compile's inductor receives has it: {", ".join(region.ops)}."""

    def __init__(self):
        super().__init__()

    def forward(self, {", ".join(names)}):
{chr(10).join(body)}
        return {returned}


def get_inputs():
    return [
        {draws},
    ]


def get_init_inputs():
    return []
'''


def _article(word: str) -> str:
    return "An" if word[0].lower() in "aeiou" else "A"


def _call(target: str, args: list, kwargs: dict) -> str:
    if target == "getitem":
        return f"{_value(args[0])}[{_value(args[1])}]"
    written = [_value(a) for a in args] + [f"{k}={_value(v)}" for k, v in kwargs.items()]
    return f"torch.ops.{target}({', '.join(written)})"


def _value(value) -> str:
    if isinstance(value, dict):
        if "in" in value:
            return f"in{value['in']}"
        if "node" in value:
            return f"r{value['node']}"
        return f"torch.{value['dtype']}"
    if isinstance(value, list):
        return f"[{', '.join(_value(v) for v in value)}]"
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return f"float('{value}')"
    return repr(value)


def _draw(spec: TensorSpec) -> str:
    dtype = f"torch.{spec.dtype}"
    if spec.dtype == "bool":
        return f"torch.rand({spec.shape}) > 0.5"
    if spec.dtype.startswith(("int", "uint")):
        return f"torch.randint(0, 8, {spec.shape}, dtype={dtype})"
    if spec.positive:  # a variance the region takes a root of
        return f"torch.rand({spec.shape}, dtype={dtype}) + 0.5"
    return f"torch.randn({spec.shape}, dtype={dtype})"
