"""Why an operator's run found no correct kernel, from its round records (``run.json``).

The same cause shows everywhere a failure is listed (the run's message, the batch ledger and
summary, ``status``, the report, ``review``): the best round's tests passed of total, its top
error kinds each with its first failing test, and the causes that were the answers' rather than
the kernels' (no code block, a provider error).
"""
from __future__ import annotations

from bbagent.agent.run_record import FailedKind, RoundRecord, WhyFailed

TOP_KINDS = 3


def failure_groups_of(verdict) -> list[FailedKind]:
    """The top error kinds of a Verdict, most tests first, each with its count and first failing
    test, for a round record."""
    kinds: dict[str, FailedKind] = {}
    for test in verdict.tests:
        if test.passed is False:
            kind = kinds.setdefault(test.error_kind or "?", FailedKind(error_kind=test.error_kind or "?", count=0,
                                                                       first_test=test.id))
            kind.count += 1
    return sorted(kinds.values(), key=lambda k: -k.count)[:TOP_KINDS]


def why_failed(rounds: list[RoundRecord]) -> WhyFailed:
    """The cause of a failed run from its round records (each round's picked candidate, and with
    several candidates each one's record)."""
    why = WhyFailed(rounds=len(rounds))
    best: tuple | None = None
    for record in rounds:
        tried = record.tried()
        outcomes = {c.outcome for c in tried}
        if outcomes == {"no_code"}:
            why.no_code_rounds.append(record.round)
        if "provider_error" in outcomes or record.outcome == "provider_error":
            why.provider_error_rounds.append(record.round)
        for candidate in tried:
            summary = candidate.summary
            if summary is not None and (best is None or summary.passed > best[2].passed):
                best = (record.round, candidate, summary)
    if best is not None:
        why.best_round, candidate, summary = best
        why.passed, why.total = summary.passed, summary.total
        why.kinds = list(candidate.failures)
        if not why.kinds:
            why.error_kind, why.message = candidate.error_kind, candidate.message
    return why
