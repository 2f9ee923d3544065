"""Why an operator's run found no correct kernel, from its round records (``run.json``).

The same cause shows everywhere a failure is listed (the run's message, the batch ledger and
summary, ``status``, the report, ``review``): the best round's tests passed of total, its top
error kinds each with its first failing test, and the causes that were the answers' rather than
the kernels' (no code block, a provider error).
"""
from __future__ import annotations

from pydantic import BaseModel

TOP_KINDS = 3


class FailedKind(BaseModel):
    error_kind: str
    count: int
    first_test: str | None = None


class WhyFailed(BaseModel):
    """A failed run, as data: what the closest kernel got right and wrong, and what the answers lacked."""
    rounds: int
    best_round: int | None = None  # the round whose kernel passed most tests
    passed: int | None = None
    total: int | None = None
    error_kind: str | None = None  # the best kernel's failure when it is not one test's (compile error, timeout)
    message: str | None = None
    kinds: list[FailedKind] = []
    no_code_rounds: list[int] = []  # rounds whose answers held no code block
    provider_error_rounds: list[int] = []

    def text(self) -> str:
        parts = [f"no candidate passed in {self.rounds} round(s)"]
        if self.best_round is not None:
            best = f"closest: round {self.best_round}"
            if self.total:
                best += f", {self.passed}/{self.total} tests passed"
            if self.kinds:
                best += " (" + ", ".join(f"{k.error_kind} x{k.count}" + (f", first {k.first_test}" if k.first_test
                                                                         else "") for k in self.kinds) + ")"
            elif self.error_kind:
                best += f": {self.error_kind}" + (f": {one_line(self.message)}" if self.message else "")
            parts.append(best)
        elif not self.no_code_rounds and not self.provider_error_rounds:
            parts.append("no kernel was evaluated")
        if self.no_code_rounds:
            parts.append("no code block in the answer of round(s) " + ", ".join(map(str, self.no_code_rounds)))
        if self.provider_error_rounds:
            parts.append("provider errors in round(s) " + ", ".join(map(str, self.provider_error_rounds)))
        return "; ".join(parts)


def failure_groups_of(verdict) -> list[dict]:
    """The top error kinds of a Verdict, most tests first, each with its count and first failing
    test, for a round record."""
    kinds: dict[str, dict] = {}
    for test in verdict.tests:
        if test.passed is False:
            kind = kinds.setdefault(test.error_kind or "?", {"error_kind": test.error_kind or "?", "count": 0,
                                                             "first_test": test.id})
            kind["count"] += 1
    return sorted(kinds.values(), key=lambda k: -k["count"])[:TOP_KINDS]


def why_failed(rounds: list[dict]) -> WhyFailed:
    """The cause of a failed run from its round records (each round's picked candidate, and with
    several candidates each one's record)."""
    why = WhyFailed(rounds=len(rounds))
    best = None
    for record in rounds:
        tried = record.get("candidates") or [record]
        outcomes = {c.get("outcome") for c in tried}
        if outcomes == {"no_code"}:
            why.no_code_rounds.append(record["round"])
        if "provider_error" in outcomes or record.get("outcome") == "provider_error":
            why.provider_error_rounds.append(record["round"])
        for candidate in tried:
            summary = candidate.get("summary")
            if summary is None:
                continue
            score = (summary.get("passed", 0), summary.get("total", 0))
            if best is None or score[0] > best[0][0]:
                best = (score, record["round"], candidate)
    if best is not None:
        (passed, total), why.best_round, candidate = best
        why.passed, why.total = passed, total
        why.kinds = [FailedKind(**kind) for kind in candidate.get("failures") or []]
        if not why.kinds:
            why.error_kind, why.message = candidate.get("error_kind"), candidate.get("message")
    return why


def one_line(text: str | None, width: int = 600) -> str:
    """``text`` on one line: its non-blank lines joined (a message such as "its source breaks these
    rules:" keeps the rules that follow), cut to ``width`` with "..." (verdict.json has it whole)."""
    line = " ".join(part.strip() for part in (text or "").splitlines() if part.strip())
    return line if len(line) <= width else line[:width - 3] + "..."
