"""The first prompt for a program problem (``prompts/program.j2``).

It holds the program's source, what one shape-only run of it found (``harness.program_facts``:
inputs, outputs, weights and the aten operators it calls), the GPU's facts and Triton's traps as
operators' prompts have them, and, for the prompt families of the operators the program runs
(views and copies aside), each family's Triton guidance and, for the first ones, its worked
example; for a region across matrix products (``agent.regions.spanning``), how to fuse it, with a
worked example of the technique on a problem of its own.
"""
from __future__ import annotations

import ast
import re

from bbagent.agent.families import PROMPTS_DIR, family_of
from bbagent.agent.gpu_facts import facts_for
from bbagent.agent.generate.profile_feedback import program_kernels_part
from bbagent.agent.generate.prompting import COMPILE_BUDGET_S, WORDINGS, Wording, template
from bbagent.harness.interface import (LIBRARY_POLICIES, ProgramFacts, ProgramProblem, Verdict, default_device,
                                       triton_version)

NOT_COMPUTE_FAMILIES = ("copy_layout", "generic")  # views, copies and the unlisted: no guidance of their own
EXAMPLES_IN_PROMPT = 2


def program_families(facts: ProgramFacts) -> list[str]:
    """The prompt families of the operators the program computes with, in the order of first use."""
    found = dict.fromkeys(family_of(use.name) for use in facts.aten_ops)
    return [family for family in found if family not in NOT_COMPUTE_FAMILIES]


def family_guidance(family: str, context: dict, wording: Wording = WORDINGS["triton"]) -> str:
    """The family's guidance in ``wording``'s language, rendered with ``context`` (empty where it has
    none): the ``guidance`` block of the family's template, or the language's own file for it."""
    if not wording.own_guidance:
        own = wording.family_guidance(family)
        return template(own).render(**context).strip() if own else ""
    family_template = template(f"families/{family}.j2")
    block = family_template.blocks.get("guidance")
    return "".join(block(family_template.new_context(context))).strip() if block else ""


def render_program_prompt(problem: ProgramProblem, facts: ProgramFacts, device: str | None = None,
                          library: str = "gemm", dsl: str = "triton") -> str:
    """The first prompt for ``problem``, judged on ``device`` ("cuda", or "cpu" under the Triton
    interpreter; default as the evaluation's), with ``library`` the policy on what may stay in torch,
    asking for kernels in ``dsl``."""
    if library not in LIBRARY_POLICIES:
        raise ValueError(f"library policy must be one of {', '.join(LIBRARY_POLICIES)} (got {library!r})")
    device = device or default_device()
    wording = WORDINGS[dsl]
    shared = {"stack": {"triton": triton_version(), "interpreter": device == "cpu"}, "facts": facts_for(device),
              "dsl": wording.context("generic")}
    families = program_families(facts)
    examples = [example for example in map(wording.example, families) if example is not None][:EXAMPLES_IN_PROMPT]
    guidance = [{"family": family, "text": text} for family in families
                if (text := family_guidance(family, shared, wording))]
    context = {**shared, "problem": {"name": problem.name, "level": problem.level}, "source": problem.text,
               "region_guidance": region_guidance(problem.text, shared),
               "init_args": facts.init_args, "inputs": facts.inputs, "outputs": facts.outputs,
               "input_size": _size(facts.input_bytes), "parameters": facts.parameters, "aten_ops": facts.aten_ops,
               "trace_error": facts.trace_error, "library": library, "guidance": guidance, "examples": examples}
    return template("program.j2").render(**context).strip() + "\n"


def region_guidance(source: str, context: dict) -> str:
    """How to fuse a region across matrix products (``prompts/regions/<kind>.j2``) where the
    problem is one (``bbagent regions`` writes its ``REGION_KIND``); empty otherwise."""
    found = re.search(r"^REGION_KIND = (\"[^\"\n]*\")$", source, re.MULTILINE)
    if found is None:
        return ""
    name = re.sub(r"[^a-z]+", "_", ast.literal_eval(found.group(1)).lower()).strip("_")
    if not (PROMPTS_DIR / "regions" / f"{name}.j2").is_file():
        return ""
    return template(f"regions/{name}.j2").render(**context, region_example=region_example).strip()


def region_example(name: str) -> dict:
    """A worked example a region kind's guidance shows (``prompts/regions/examples/``): the
    problem's source and an answer judged right, as text (never rendered as templates)."""
    folder = PROMPTS_DIR / "regions" / "examples"
    return {"name": name, "problem": (folder / f"{name}_problem.py").read_text(),
            "code": (folder / f"{name}.py").read_text()}


def _size(size: int) -> str:
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def render_program_performance_feedback(verdict: Verdict, *, previous_best=None, target: float | None,
                                        target_baseline: str = "inductor", **_operator_only) -> str:
    """Feedback on a correct, timed round of a program's answer (``program_performance.j2``): its one
    timed input against eager and torch.compile, the floor of its reference's FLOPs and bytes beside
    both (where they were counted), and the GPU kernels of each per call where they were profiled.
    The options that apply to an operator's shapes (the slowest, the roofline target, the profiles)
    are taken and not used."""
    perf = verdict.performance
    if perf is None or not perf.tests:
        raise ValueError("performance feedback is for a timed Verdict")
    timed = perf.tests[0]
    return template("program_performance.j2").render(
        verdict=verdict, perf=perf, t=timed, compiled=(timed.baselines or {}).get("inductor"),
        inductor=(perf.baselines or {}).get("inductor"), kernels=program_kernels_part(perf),
        previous_best=previous_best, target=target, target_baseline=target_baseline, target_roof=0.0, roof=None,
        compile_budget=COMPILE_BUDGET_S).strip() + "\n"
