"""The whole model decides what is served under torch.compile (``check-model --compile --gate``).

A kernel or region answer measured faster than inductor on its own can still make the compiled
model slower (a launch inductor would have fused away, a layout it must convert). So each
candidate (every approved overload or region answer the compiled model ran) is measured in the
model: compiled with it alone against torch.compile alone, in interleaved rounds; then the
winners together, and every candidate together (two kernels side by side can win where neither
does alone: one region's layout is the next one's input). A set wins only where the model gets faster beyond the noise: the 95%
interval of its speedup over torch.compile (a bootstrap of the rounds' paired time ratios) lies
above 1.0; ties and noise are not served. The set with the best lower bound is the plan.

The plan is recorded per model, torch.compile mode, device and stack
(``ROOT/runs/plans/<model>-<mode>-<device>.json``, a ``ServingPlan``), so that
``bbagent.enable(model=..., mode=...)`` serves exactly what won there, and says why it leaves out
each other kernel.
"""
from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bbagent.agent.errors import UsageError
from bbagent.agent.machine import this_machine
from bbagent.agent.storage import write_atomic

CONFIDENCE = 0.95
RESAMPLES = 2000
PLANS = Path("runs") / "plans"


class SetTiming(BaseModel):
    """One candidate set in the model: its members, the rounds' ms per call of torch.compile alone
    and with the set, and the speedup over torch.compile with its interval."""
    model_config = ConfigDict(extra="forbid")
    members: list[str]
    compile_ms: list[float]
    bbagent_ms: list[float]
    speedup: float
    low: float
    high: float

    @property
    def wins(self) -> bool:
        return self.low > 1.0


class ServingPlan(BaseModel):
    """What the whole-model gate serves for one model, mode, device and stack, and why not the rest."""
    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    model: str
    mode: str
    device: str
    gpu: str | None
    torch: str
    triton: str
    served: list[str]
    left_out: dict[str, str]
    sets: list[SetTiming]


def timed_set(members: list[str], compile_ms: list[float], bbagent_ms: list[float]) -> SetTiming:
    """The set's speedup over torch.compile (the geometric mean of the rounds' ratios) and its
    bootstrap interval."""
    ratios = [math.log(c / b) for c, b in zip(compile_ms, bbagent_ms) if c > 0 and b > 0]
    if not ratios:
        return SetTiming(members=members, compile_ms=compile_ms, bbagent_ms=bbagent_ms, speedup=0.0, low=0.0, high=0.0)
    draw = random.Random(0)
    means = sorted(statistics.fmean(draw.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    low, high = means[int(tail * RESAMPLES)], means[min(RESAMPLES - 1, int((1 - tail) * RESAMPLES))]
    return SetTiming(members=members, compile_ms=compile_ms, bbagent_ms=bbagent_ms,
                     speedup=math.exp(statistics.fmean(ratios)), low=math.exp(low), high=math.exp(high))


def sets_together(singles: list[SetTiming]) -> list[list[str]]:
    """The sets of several candidates the gate measures after each one alone: the winners, and
    every candidate (where that is another set)."""
    winners = [single.members[0] for single in singles if single.wins]
    everyone = [single.members[0] for single in singles]
    groups: list[list[str]] = []
    for group in (winners, everyone):
        if len(group) > 1 and group not in groups:
            groups.append(group)
    return groups


def decided(singles: list[SetTiming], together: list[SetTiming],
            alone: dict[str, float] | None = None) -> tuple[list[str], dict[str, str]]:
    """The members of the winning set with the best lower bound (none where none wins), and why
    each other candidate is left out (``together``: the sets of several measured; ``alone``: each
    one's speedup over torch.compile measured on its own problem, said beside the model's where it
    was faster alone)."""
    winners = [s for s in singles + together if s.wins]
    best = max(winners, key=lambda s: s.low, default=None)
    served = best.members if best else []
    left_out = {}
    for single in singles:
        name = single.members[0]
        if name in served:
            continue
        if single.wins:
            left_out[name] = f"faster alone ({_said(single)}), but not in the best set"
        elif single.speedup >= 1.0:
            left_out[name] = f"not faster beyond the noise in the model ({_said(single)})"
        else:
            left_out[name] = f"makes the model slower ({_said(single)})"
        if name in left_out and alone is not None and alone.get(name, 0) > 1.0:
            left_out[name] = f"wins alone ({alone[name]:.3f}x torch.compile on its own problem) but {left_out[name]}"
    return served, left_out


def _said(timing: SetTiming) -> str:
    return f"{timing.speedup:.3f}x torch.compile, 95% interval {timing.low:.3f}-{timing.high:.3f}"


def plan_path(root: Path, model: str, mode: str, device: str) -> Path:
    return Path(root) / PLANS / f"{model}-{mode}-{device}.json"


def save_plan(root: Path, plan: ServingPlan) -> Path:
    path = plan_path(root, plan.model, plan.mode, plan.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, plan.model_dump_json(indent=1) + "\n")
    return path


def load_plan(root: Path, model: str, mode: str, device: str) -> ServingPlan:
    """The plan recorded for ``model`` in ``mode`` on ``device``, checked to be this stack's; a
    UsageError naming the command that records one."""
    path = plan_path(root, model, mode, device)
    try:
        plan = ServingPlan.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no serving plan for {model} in mode {mode} on {device} under {Path(root) / PLANS}: run "
                         f"'bbagent check-model --model {model} --compile {mode} --gate' (or --script) first") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"the serving plan {path} cannot be read ({exc}): record it again with check-model "
                         "--gate") from None
    here = this_machine()
    if (plan.torch, plan.triton, plan.gpu) != (here.torch, here.triton, here.gpu if device == "cuda" else None):
        raise UsageError(f"the serving plan {path} was measured on torch {plan.torch}, triton {plan.triton}, "
                         f"{plan.gpu or 'the CPU'}; this is torch {here.torch}, triton {here.triton}, "
                         f"{here.gpu or 'the CPU'}: measure it here (check-model --gate)")
    return plan

