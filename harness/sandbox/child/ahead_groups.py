"""The compilations ahead of a child's tests, group by group (``harness.sandbox.child.compile_ahead``
does the compiling): which tests each group holds, when it starts, what each test waits for, and
what is reported of it (``events.CompiledAhead``)."""
from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from bbagent.harness import events
from bbagent.harness.stopwatch import Stopwatch

if TYPE_CHECKING:
    from bbagent.harness.sandbox.child.compile_ahead import Compiling


class AheadGroups:
    """The compilations ahead of the tests, one group of tests at a time (the first tier, then
    the rest or the failing classes): started when the tests reach a group's first, waited for
    by each test for its own call, reported (``CompiledAhead``) when the group's tests have run."""

    def __init__(self, planned: list, served: dict, compile_clock, device: str, send, stopwatch: Stopwatch):
        self.planned, self.served, self.compile_clock, self.device = planned, served, compile_clock, device
        self.send, self.stopwatch = send, stopwatch
        self.compiling: Compiling | None = None  # the group's compilations under way (each test waits for its own)
        self.call_of: dict[int, int] = {}  # test number -> the number of the call made for its layout
        self.group_end = 0  # the tests before this one had their kernels compiled ahead

    def due(self, number: int) -> bool:
        """This test is the first after the last group."""
        return number == self.group_end

    def finish_if_done(self, number: int) -> None:
        """At test ``number``: the group's tests all ran if it is the group's end."""
        if number == self.group_end:
            self.finish()

    def finish(self) -> None:
        """The group's compilations reported, all done."""
        if self.compiling is not None:
            with self.stopwatch.part("ahead"):
                self.send(events.CompiledAhead(**self.compiling.finish()))
            self.compiling = None

    def start(self, number: int, end: int, until: float | None = None) -> None:
        """Compile ahead (``harness.sandbox.child.compile_ahead``) for tests ``number`` to ``end`` of the
        run order: one call per input layout and autotuner configs held (``CompileClock.rotate``),
        each announced (a crash in it is then the test's); no call after the ``until`` instant
        (``time.perf_counter()``). ``call_of`` records, per test, the number of its layout's call."""
        from bbagent.harness.sandbox.child.compile_ahead import layout_key, start_compiling_ahead
        self.group_end = end
        call_numbers: dict[tuple, int] = {}
        self.call_of = {}

        def calls():
            for test in range(number, end):
                if until is not None and time.perf_counter() >= until:
                    return
                name, _, case = self.planned[test]
                self.compile_clock.rotate(test)
                key = (layout_key(name, case), self.compile_clock.held_configs())
                new = key not in call_numbers
                self.call_of[test] = call_numbers.setdefault(key, len(call_numbers))
                if new:
                    yield functools.partial(_call_on_clones, self.served[name], case, self.send, self.stopwatch)
        with self.stopwatch.part("ahead"):
            self.compiling = start_compiling_ahead(calls(), self.device, self.compile_clock.paused)

    def wait_for(self, number: int, timeout: float | None) -> bool:
        """This test's own call's kernels compiled (all of the group's, where it made none); False
        where ``timeout`` passed first."""
        if self.compiling is None:
            return True
        with self.stopwatch.part("ahead"):
            return self.compiling.wait_for_call(self.call_of.get(number, len(self.planned)), timeout=timeout)

    def drop(self, report: bool) -> None:
        """What no test will wait for is abandoned (and, ``report``, said)."""
        if self.compiling is not None:
            abandoned = self.compiling.abandon()
            if report:
                self.send(events.CompiledAhead(**abandoned))
            self.compiling = None


def _call_on_clones(kernel, case, send, stopwatch: Stopwatch) -> None:
    from bbagent.harness.inputs import clone_value
    send(events.AheadCall(id=case.id))
    with stopwatch.part("ahead_inputs"):
        args, kwargs = clone_value(case.inputs())
    kernel(*args, **kwargs)
