"""Seconds spent in named parts of a loop, summed over its passes (the tests' time split into
inputs, reference, candidate, checks and the rest: ``timings.test_parts`` in the Verdict)."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


class Stopwatch:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def rounded(self) -> dict[str, float]:
        return {name: round(seconds, 3) for name, seconds in self.seconds.items()}

