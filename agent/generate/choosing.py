"""Which kernel a round and a run keep: a round's pick among its candidates (``choose``), whether a
correct kernel replaces the run's best (``beats``: faster, on the same GPU model), and the best
kernel as a batch records it (``BestKernel``). Its rules are the loop's; it holds no state."""
from __future__ import annotations

from dataclasses import dataclass

from bbagent.agent.generate.dispatch import DispatchPlan
from bbagent.agent.providers import Completion
from bbagent.agent.run_record import CandidateRecord
from bbagent.harness.interface import Verdict


@dataclass
class BestKernel:
    """The accepted kernel of a run as a batch records it: its round, geomean speedup over eager
    (None untimed), fast_p, the GPU model it was timed on, and its speedups over compiled baselines."""
    round: int
    speedup: float | None
    fast_p: dict | None
    gpu: str | None
    baseline_speedups: dict | None


@dataclass
class Best:
    """The best correct kernel so far: its round, source, Verdict and geomean speedup (None
    untimed); for a dispatcher bbagent composed in that round, its plan."""
    round: int
    source: str
    verdict: Verdict
    speedup: float | None
    dispatcher: DispatchPlan | None = None

    @property
    def parts(self) -> tuple[int, int] | None:
        return self.dispatcher.rounds() if self.dispatcher is not None else None


def _fast_p(verdict: Verdict) -> dict | None:
    """fast_p of a timed Verdict (share of shapes at least p times faster than eager), else None."""
    summary = verdict.performance.summary if verdict.performance is not None else None
    return dict(summary.fast_p) if summary is not None else None


def _baseline_speedups(verdict: Verdict) -> dict | None:
    """The geomean speedups over compiled baselines (``{"inductor": x}``) of a timed Verdict."""
    found = {name: verdict.baseline_speedup(name) for name in ((verdict.performance.baselines if verdict.performance
                                                                else None) or {})}
    return {name: value for name, value in found.items() if value is not None} or None


def timed_on(verdict: Verdict) -> str | None:
    """The GPU model a Verdict's speedups were measured on (None: not timed)."""
    performance = verdict.performance
    return performance.gpu if performance is not None and performance.measured else None


def beats(verdict: Verdict, best: Best | None) -> bool:
    """Whether a correct kernel replaces ``best``: the first one always does, a later one when it
    was timed and is faster, on the same GPU model (speedups on two models do not compare: a
    cluster's executor keeps an operator on one model while it can)."""
    if best is None:
        return True
    speedup = verdict.geomean_speedup()
    if speedup is None:
        return False
    if best.speedup is None:
        return True
    return timed_on(verdict) == timed_on(best.verdict) and speedup > best.speedup


@dataclass
class Candidate:
    """One answer of a round: its index, completion (None: the call failed), kernel source and
    Verdict (None: no code, or no answer)."""
    number: int
    completion: Completion | None
    source: str | None
    verdict: Verdict | None
    record: CandidateRecord


def choose(tried: list[Candidate]) -> Candidate:
    """The round's result: the fastest correct candidate (the first, if none was timed), else
    the one that passed most tests, else the first."""
    judged = [(c, c.verdict) for c in tried if c.verdict is not None]
    correct = [(c, verdict) for c, verdict in judged if verdict.passed]
    if correct:
        timed = [(c, verdict, speedup) for c, verdict in correct if (speedup := verdict.geomean_speedup()) is not None]
        if not timed:
            return correct[0][0]
        gpu = timed_on(timed[0][1])  # speeds compare on one GPU model only
        return max((t for t in timed if timed_on(t[1]) == gpu), key=lambda t: t[2])[0]
    if judged:
        return max(judged, key=lambda pair: pair[1].summary.passed)[0]
    return next(c for c in tried if c.completion is not None)  # there is one: a round with no answer raised


def candidate_line(c: Candidate) -> str:
    if c.completion is None:
        return f"no answer ({(c.record.message or '')[:160]})"
    if c.verdict is None:
        return "no code block"
    s = c.verdict.summary
    line = f"{c.verdict.verdict.upper()} {s.passed}/{s.total} tests"
    if c.verdict.passed:
        speedup = c.verdict.geomean_speedup()
        return line + (f", geomean {speedup:.3g}x eager" if speedup is not None else "")
    detail = (c.verdict.message or c.verdict.error_kind or "").splitlines()
    return line + (f" ({detail[0][:160]})" if detail else "")


def round_summary(n: int, tried: list[Candidate], pick: Candidate) -> str:
    if len(tried) == 1:
        return f"round {n}: {candidate_line(pick)}"
    correct = sum(1 for c in tried if c.verdict is not None and c.verdict.passed)
    return (f"round {n}: {correct} of {len(tried)} candidates correct; picked candidate {pick.number + 1}: "
            f"{candidate_line(pick)}")


def best_kernel_of(best: Best | None) -> BestKernel | None:
    """The batch's record of a run's best kernel (None: no correct kernel)."""
    if best is None:
        return None
    verdict = best.verdict
    return BestKernel(round=best.round, speedup=best.speedup, fast_p=_fast_p(verdict),
                      gpu=verdict.environment.gpu or verdict.environment.device,
                      baseline_speedups=_baseline_speedups(verdict))
