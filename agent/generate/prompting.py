"""Render prompts from the Jinja templates in ``prompts/``.

Template choice for an operator: ``prompts/ops/<op>.j2`` if it exists, else the
family template named for the op in ``prompts/families.json`` (``generic`` when the
op is not listed). Rendering uses StrictUndefined, so a template that asks for a
value the code does not provide fails loudly instead of printing nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata

import jinja2
import torch

from bbagent.agent.families import PROMPTS_DIR, family_map, family_of
from bbagent.agent.generate.signature import parameters, signature
from bbagent.agent.gpu_facts import facts_for
from bbagent.harness.interface import TOLERANCES, channels_last_call, materialize, tensors_in
from bbagent.harness.interface import triton_version
from bbagent.harness.interface import default_device, describe, op_name as op_name_of, opinfo_listing, packet_name, value_mode
from bbagent.harness.interface import FLOAT_DTYPES, SAMPLE_DTYPES
from bbagent.harness.interface import ALLOWED, SEED_DRAW
from bbagent.harness.interface import Limits
from bbagent.harness.interface import load_calls
from bbagent.harness.interface import functional_of
from bbagent.harness.interface import Verdict
from bbagent.harness.interface import DSLS, HELION, TRITON, Dsl


TRACE_SHAPES_IN_PROMPT = 5
COMPILE_BUDGET_S = Limits().compile_seconds


def elide(text: str, limit: int) -> str:
    """Keep the head and the tail of a long text, with a marker in between."""
    text = str(text)
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters elided ...]\n{text[-half:]}"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    if not (PROMPTS_DIR / "base.j2").is_file():
        raise FileNotFoundError(f"prompt templates not found at {PROMPTS_DIR}: this bbagent installation is "
                                "incomplete; reinstall it (pip install bbagent, or pip install -e . in a checkout)")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["elide"] = elide
    return env


def template(name: str) -> jinja2.Template:
    """The template ``prompts/<name>``, rendered with StrictUndefined."""
    return _environment().get_template(name)


@dataclass(frozen=True)
class Wording:
    """Where the parts of the prompts that depend on the kernel language come from, under
    ``prompts/`` (``folder``: "" for Triton, whose files are the originals): the contract's rule on
    where computation runs (``kernels.j2``), the traps (``traps.j2``), the worked examples
    (``examples/<family>.py``, listed in families.json under ``examples_key``) and, where the family
    templates' own guidance (written for Triton) is not in this language, guidance per family
    (``guidance/<family>.j2``, else ``guidance/generic.j2``)."""
    dsl: Dsl
    folder: str
    examples_key: tuple[str, ...]
    own_guidance: bool  # the family templates' guidance blocks are written in this language

    def context(self, family: str) -> dict:
        """What the templates read of the language (``dsl``) for an operator of ``family``."""
        return {"name": self.dsl.name, "title": self.dsl.title, "version": _version(self.dsl.package),
                "kernels_rule": f"{self.folder}kernels.j2", "traps": f"{self.folder}traps.j2",
                "guidance": None if self.own_guidance else self.guidance(family)}

    def guidance(self, family: str) -> str:
        """The template of the family's guidance: its own, else the generic one."""
        return self.family_guidance(family) or f"{self.folder}guidance/generic.j2"

    def family_guidance(self, family: str) -> str | None:
        """The template of guidance written for ``family`` in this language, or None."""
        own = f"{self.folder}guidance/{family}.j2"
        return own if (PROMPTS_DIR / own).is_file() else None

    def example(self, family: str) -> dict | None:
        """The family's worked example: the operator it is written for and its code (read as text,
        never rendered as a template), or None."""
        listed = family_map()
        for key in self.examples_key:
            listed = listed.get(key, {})
        op = listed.get(family)
        if op is None:
            return None
        return {"op": op, "code": (PROMPTS_DIR / self.folder / "examples" / f"{family}.py").read_text()}


WORDINGS = {TRITON.name: Wording(TRITON, "", ("examples",), own_guidance=True),
            HELION.name: Wording(HELION, "helion/", ("helion", "examples"), own_guidance=False)}
assert set(WORDINGS) == set(DSLS), "every kernel language bbagent judges has its prompts"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "(not installed here)"


def template_name(op: str) -> str:
    """The template of ``op``'s first prompt: its own (``ops/<op>.j2``), else its family's; in any
    kernel language (the language's own parts come from ``Wording``)."""
    if (PROMPTS_DIR / "ops" / f"{op}.j2").exists():
        return f"ops/{op}.j2"
    return f"families/{family_of(op)}.j2"


def op_context(op, device: str | None = None, channels_last: bool = False, dsl: str = "triton") -> dict:
    """Everything the templates read about the overload ``op`` (resolved: an OpOverload), for
    tests run on ``device`` (default: the evaluation's default, CUDA where there is a GPU, else the
    CPU under the Triton interpreter); ``channels_last``: its trace inputs are also tested in that
    layout; ``dsl``: the kernel language asked for."""
    device = device or default_device()
    op_name = op_name_of(op)
    summary = describe(op)
    calls = load_calls(op_name)
    functional = functional_of(op)
    # an in-place or out= overload also runs its functional overload's tests
    tested_as = functional if functional is not None else op
    tested = calls + (load_calls(op_name_of(functional)) if functional not in (None, op) else [])
    params = parameters(op, tested)
    mode = value_mode(op)
    return {
        "op": {"name": summary.name, "schema": summary.schema, "doc": summary.doc,
               "signature": signature(params), "parameters": params, "base": packet_name(op).rstrip("_"),
               "is_inplace": summary.is_inplace, "is_out": summary.is_out, "returns": len(op._schema.returns),
               "torch_names": torch_spellings(packet_name(op))},
        "dtypes": tested_dtypes(op_name_of(tested_as), tested),
        "traces": [{"count": c.count, "args": c.describe()} for c in calls[:TRACE_SHAPES_IN_PROMPT]],  # most frequent first
        "trace_total": len(calls),
        "value_mode": mode,
        "tolerances": [{"dtype": str(d).removeprefix("torch."), "atol": f"{a:g}", "rtol": f"{r:g}"}
                       for d, (a, r) in TOLERANCES.items() if d in FLOAT_DTYPES],
        "allowed": ALLOWED + ((SEED_DRAW,) if mode == "distribution" else ()),
        "stack": {"triton": triton_version(), "interpreter": device == "cpu"},
        "example": WORDINGS[dsl].example(family_of(op_name)),
        "dsl": WORDINGS[dsl].context(family_of(op_name)),
        "channels_last": channels_last_examples(op, calls, device) if channels_last else None,
        "facts": facts_for(device),  # the GPU's probed facts (prompts/device.j2); None on the CPU
    }


CHANNELS_LAST_EXAMPLES = 2


def channels_last_examples(op, calls: list, device: str) -> list[dict]:
    """Trace inputs in channels-last layout, as tested, with the layout of what aten returns for
    them on ``device``. Run on fake tensors of that device (no data, no kernel): the layout aten
    picks depends on the device (a convolution on CUDA follows cuDNN's choice), which meta
    tensors, having none, do not show."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    examples = []
    for call in calls:
        changed = channels_last_call(call)
        if changed is None:
            continue
        try:
            with FakeTensorMode():
                result = op(*materialize(changed.args, device, None), **materialize(changed.kwargs, device, None))
        except Exception:  # noqa: BLE001 - an input aten refuses on shapes alone: shown without its output
            result = None
        examples.append({"args": changed.describe(), "output": [_layout(t) for t in tensors_in(result)]})
        if len(examples) == CHANNELS_LAST_EXAMPLES:
            break
    return examples


def _layout(t) -> str:
    import torch
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return f"{list(t.shape)} channels-last, strides {tuple(t.stride())}"
    if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d) and not t.is_contiguous():
        return f"{list(t.shape)} channels-last (3-d), strides {tuple(t.stride())}"
    if t.is_contiguous():
        return f"{list(t.shape)} contiguous"
    return f"{list(t.shape)} strides {tuple(t.stride())}"


def torch_spellings(name: str) -> list[str]:
    """How Python code reaches the operator ``name`` (``relu_``): ``torch.relu_``,
    ``torch.nn.functional.relu``, ``x.relu_()``, where they exist."""
    spellings = [f"torch.{name}"] if hasattr(torch, name) else []
    if hasattr(torch.nn.functional, name.rstrip("_")):
        spellings.append(f"torch.nn.functional.{name.rstrip('_')}")
    return spellings + ([f"x.{name}()"] if hasattr(torch.Tensor, name) else [])


def tested_dtypes(name: str, calls: list) -> list[str]:
    """The dtypes of the tests: OpInfo samples in the dtypes bbagent draws that the op's OpInfos
    support, and the traces' dtypes; in the order of ``SAMPLE_DTYPES``, others after them."""
    supported = set(opinfo_listing()["ops"].get(name, {}).get("dtypes", []))
    drawn = {str(d).removeprefix("torch.") for d in SAMPLE_DTYPES} & supported
    traced = {spec.dtype for call in calls for spec in call.tensor_specs()}
    order = [str(d).removeprefix("torch.") for d in SAMPLE_DTYPES]
    found = drawn | traced
    return [d for d in order if d in found] + sorted(found - set(order))


def render_prompt(problem, device: str | None = None, channels_last: bool = False, dsl: str = "triton") -> str:
    """The first prompt for ``problem`` (a ``harness.problem.OperatorProblem``), whose tests run on
    ``device`` ("cuda" or "cpu": the CPU runs them under the Triton interpreter; default as the
    evaluation's), asking for a kernel in ``dsl``; it names the in-place and out= overloads bbagent
    serves (and tests) with the same kernel."""
    context = {**op_context(problem.computation, device, channels_last, dsl), "also_serves": problem.also_serves}
    return _environment().get_template(template_name(problem.name)).render(**context).strip() + "\n"


def render_feedback(verdict: Verdict | None, *, no_code: bool = False, max_groups: int = 4, best=None) -> str:
    """Feedback on a failed round (``no_code``: on an answer without code, when ``verdict`` is
    None). ``best``: the best correct kernel of earlier rounds (kept)."""
    template = _environment().get_template("feedback.j2")
    return template.render(verdict=verdict, no_code=no_code, max_groups=max_groups, best=best,
                           compile_budget=COMPILE_BUDGET_S).strip() + "\n"


def render_performance_feedback(verdict: Verdict, *, previous_best=None, target: float | None, slowest: int = 5,
                                target_baseline: str = "eager", target_roof: float = 0.0,
                                profiled: str | None = None) -> str:
    """Feedback on a correct, timed round: speedups, the slowest shapes, the bandwidth gap, the
    profiles' figures (``profiled``: ``agent.generate.profile_feedback.profile_part``), and what
    ends optimisation (``target`` speedup, if any; ``target_roof`` of the roofline, if any). A
    program's is ``agent.generate.program_prompting.render_program_performance_feedback``."""
    perf = verdict.performance
    if perf is None:
        raise ValueError("performance feedback is for a timed Verdict")
    shapes = sorted(perf.counted_tests(), key=lambda t: t.speedup or 0.0)[:slowest]
    furthest = [t for t in perf.furthest_from_roof(3) if t.roof_fraction is not None]
    return _environment().get_template("performance.j2").render(
        verdict=verdict, perf=perf, slowest=shapes, furthest=furthest, previous_best=previous_best, target=target,
        target_baseline=target_baseline, target_roof=target_roof, roof=verdict.geomean_roof_fraction(),
        compile_budget=COMPILE_BUDGET_S, profiled=profiled).strip() + "\n"
