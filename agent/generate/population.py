"""The population of an optimisation run: the correct, timed kernels worth keeping, and for the
next prompt the one that beats the best kernel on some shapes.

A kernel fastest on small shapes loses the geomean to one fastest on large shapes and would be
forgotten; kept here, its code and the shapes where it wins go into the next prompt beside the
best kernel, so that the model can combine the two. Kernels timed on another GPU model are not
compared (their times do not compare).
"""
from __future__ import annotations

from dataclasses import dataclass

from bbagent.harness.interface import Verdict

KEPT_BY_GEOMEAN = 3  # besides these, every kernel that is the fastest on some shape is kept
WIN_MARGIN = 0.95  # a shape counts as won where the rival takes at most this share of the best's time


@dataclass
class Member:
    round: int
    source: str
    verdict: Verdict
    parts: tuple[int, int] | None = None  # a dispatcher bbagent composed: the rounds of its parts

    @property
    def gpu(self) -> str | None:
        return self.verdict.performance.gpu if self.verdict.performance is not None else None

    def times_us(self) -> dict[str, float]:
        """Each timed shape's median time, in microseconds, by its input."""
        tests = self.verdict.performance.tests if self.verdict.performance is not None else []
        return {t.input: t.candidate.median_ms * 1e3 for t in tests if t.candidate is not None and t.candidate.median_ms}


@dataclass
class Rival:
    """A kept kernel faster than the best on some shapes: which, with both times (us)."""
    member: Member
    wins: list[tuple[str, float, float]]  # (input, its time, the best's time)


class Population:
    def __init__(self):
        self.members: list[Member] = []

    def add(self, round: int, source: str, verdict: Verdict, parts: tuple[int, int] | None = None) -> None:
        """Keep a correct, timed kernel (others are ignored), then drop those no longer worth it."""
        if verdict.passed and verdict.geomean_speedup() is not None:
            self.members.append(Member(round, source, verdict, parts))
            self._prune()

    def member(self, round: int, parts: tuple[int, int] | None = None) -> Member | None:
        """The kept kernel of ``round`` (``parts``: the dispatcher composed in that round)."""
        return next((m for m in self.members if m.round == round and m.parts == parts), None)

    def _prune(self) -> None:
        by_geomean = sorted(self.members, key=lambda m: m.verdict.geomean_speedup() or 0.0, reverse=True)
        kept = {id(m) for m in by_geomean[:KEPT_BY_GEOMEAN]}
        fastest: dict[tuple, tuple[float, Member]] = {}  # (GPU model, shape): the least time, and whose
        for member in self.members:
            for shape, us in member.times_us().items():
                key = (member.gpu, shape)
                if key not in fastest or us < fastest[key][0]:
                    fastest[key] = (us, member)
        kept |= {id(m) for _, m in fastest.values()}
        self.members = [m for m in self.members if id(m) in kept]

    def rival(self, best_round: int, parts: tuple[int, int] | None = None) -> Rival | None:
        """The kept kernel that beats the one of ``best_round`` (``parts``: the dispatcher of that
        round) on the most shapes (the largest time saved breaking ties), on the same GPU model;
        None where none does."""
        best = self.member(best_round, parts)
        if best is None:
            return None
        best_times = best.times_us()
        found = []
        for member in self.members:
            if member is best or member.gpu != best.gpu:
                continue
            times = member.times_us()
            wins = [(shape, times[shape], best_times[shape]) for shape in best_times
                    if shape in times and times[shape] <= WIN_MARGIN * best_times[shape]]
            if wins:
                found.append(Rival(member, wins))
        return max(found, key=lambda r: (len(r.wins), sum(b - t for _, t, b in r.wins)), default=None)
