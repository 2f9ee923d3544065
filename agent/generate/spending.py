"""What a run's LLM calls cost, counted as each answer comes, and the run's own budget.

One ``Spent`` per run: the loop counts every answer into it, run.json and the kernel's provenance
write it out, and a batch holds the same object for each running operator, so the batch's budget
counts what a run has spent so far without reading its run.json back.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from bbagent.agent.run_record import Halt, StoppedBecause


@dataclass
class Spent:
    """Tokens, dollars (a lower bound where a model has no price: ``cost_complete`` False) and how
    many answers came from the call log."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_complete: bool = True
    cached_calls: int = 0
    paid_by: set[str] = field(default_factory=set)  # the runs that paid for the answers taken from the call log

    def count(self, completion) -> None:
        """Add one answer (``agent.providers.Completion``)."""
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        if completion.cost_usd is None:
            self.cost_complete = False  # a model without a price: the total is a lower bound
        else:
            self.cost_usd += completion.cost_usd
        self.cached_calls += int(completion.cached)
        if completion.cached and completion.paid_by:
            self.paid_by.add(completion.paid_by)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def over_budget(self, max_cost_usd: float | None, max_tokens: int | None) -> Halt | None:
        """The stop of a run whose own budget allows no further call (its message says which), or None."""
        if max_cost_usd is not None and self.cost_usd >= max_cost_usd:
            return Halt(StoppedBecause.BUDGET,
                        f"the cost budget is spent (${self.cost_usd:.4f} of --max-cost-usd {max_cost_usd:g})")
        if max_tokens is not None and self.tokens >= max_tokens:
            return Halt(StoppedBecause.BUDGET, f"the token budget is spent ({self.tokens} of --max-tokens {max_tokens})")
        return None

    def run_fields(self) -> dict:
        """As run.json and a kernel's provenance write it."""
        return {"tokens": {"input": self.input_tokens, "output": self.output_tokens}, "cost_usd": self.cost_usd,
                "cost_complete": self.cost_complete, "cached_calls": self.cached_calls,
                "answers_paid_by": sorted(self.paid_by)}

    def ledger_fields(self) -> dict:
        """As a batch's ledger takes it (``agent.batch.ledger.Ledger.finish``)."""
        return {"tokens": (self.input_tokens, self.output_tokens), "cost_usd": self.cost_usd,
                "cost_complete": self.cost_complete}
