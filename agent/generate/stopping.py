"""What may stop a run from outside it: one signal, read by the loop at its own steps.

A run stops itself for its own reasons (a target, the rounds, its budget); from outside, a batch
stops its runs when the user stops the batch (Ctrl-C, SIGTERM) or its budget is spent. Neither
raises into the loop: the loop reads its ``StopSignal`` before each round (a cut or a spent
budget) and after each candidate (a cut only: a round's answers are never thrown away for a
budget) and ends the run itself, with the Halt it read.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from bbagent.agent.run_record import Halt, StoppedBecause


def no_budget() -> Halt | None:
    return None


@dataclass
class StopSignal:
    """``cut`` (an event a batch sets on Ctrl-C) ends the run at its next step, cutting the round in
    flight short, with ``cut_message``; ``budget()`` (a batch's) is asked before each round and
    says why no further round may start, or None."""
    cut: threading.Event = field(default_factory=threading.Event)
    budget: Callable[[], Halt | None] = no_budget
    cut_message: str = "interrupted: the batch was stopped (Ctrl-C)"

    def now(self) -> Halt | None:
        """The stop that ends the run at once, or None."""
        if self.cut.is_set():
            return Halt(StoppedBecause.INTERRUPTED, self.cut_message, status="interrupted")
        return None
