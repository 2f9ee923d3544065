"""The parent's side of the compile clock (``harness.sandbox.child.compile_clock`` is the child's): from the
child's ``Compile`` events, how long it compiled or autotuned, on the parent's own clock, so that a
child that dies mid-compile still has its pause counted up to now. The per-test limit subtracts it;
the evaluation's compile budget caps it; the evaluation's wall limit ignores it.
"""
from __future__ import annotations

from bbagent.harness.events import Compile, Event


def paused_seconds(events: list[Event], since: float, now: float) -> float:
    """Seconds after ``since`` (parent clock) spent compiling or autotuning, up to ``now``."""
    paused, started = 0.0, None
    for event in events:
        if not isinstance(event, Compile):
            continue
        at = event.received_at
        if event.phase == "start":
            started = at
        elif started is not None:
            paused += max(0.0, at - max(started, since))
            started = None
    if started is not None:
        paused += max(0.0, now - max(started, since))
    return paused


def compile_totals(events: list[Event]) -> dict:
    """The last running totals the child reported (zeros when it compiled nothing)."""
    for event in reversed(events):
        if isinstance(event, Compile) and event.phase == "end" and event.totals:
            return dict(event.totals)
    return {"compiles": 0, "autotune_runs": 0, "compile_s": 0.0, "autotune_s": 0.0}
