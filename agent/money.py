"""How a cost reads, on every surface that shows one (summaries, status, the live panel, runs,
review, the report): a model with no price (``agent.providers.prices``) makes the dollars spent a
lower bound, never a silent $0."""
from __future__ import annotations


def cost_text(cost: float | None, complete: bool = True, digits: int = 4, why: str = "no price for the model") -> str:
    """Dollars where every call was priced; where one was not (a model had no price: ``why``),
    "unknown" if nothing was priced, else the dollars as a lower bound."""
    if complete and cost is not None:
        return f"${cost:.{digits}f}"
    return f"at least ${cost:.{digits}f}" if cost else f"unknown ({why})"
