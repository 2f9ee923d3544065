"""The compilations ahead of a child's tests, group by group (``harness.sandbox.compile_ahead``
does the compiling): which tests each group holds, when it starts, what each test waits for, and
what is reported of it (``events.CompiledAhead``)."""
from __future__ import annotations

import functools
import time

from bbagent.harness import events
from bbagent.harness.stopwatch import Stopwatch


class AheadGroups:
    """The compilations ahead of the tests, one group of tests at a time (the first tier, then
    the rest or the failing classes): started when the tests reach a group's first, waited for
    by each test for its own call, reported (``CompiledAhead``) when the group's tests have run."""

    def __init__(self, planned: list, served: dict, compile_clock, device: str, send, stopwatch: Stopwatch):
        self.planned, self.served, self.compile_clock, self.device = planned, served, compile_clock, device
        self.send, self.stopwatch = send, stopwatch
        self.compiling = None  # the group's compilations under way (each test waits for its own)
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
        self.group_end = end
        with self.stopwatch.part("ahead"):
            self.compiling, self.call_of = _compile_group(self.planned, number, end, self.served, self.compile_clock,
                                                          self.device, self.send, self.stopwatch, until)

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


def _compile_group(planned: list, start: int, end: int, served: dict, compile_clock, device: str, send,
                   stopwatch: Stopwatch, until: float | None = None):
    """Compile ahead (``harness.sandbox.compile_ahead``) for tests ``start`` to ``end`` of the run
    order: one call per input layout and autotuner configs held (``CompileClock.rotate``), each
    announced (a crash in it is then the test's). Returns the compilations under way
    (``Compiling``) and, per test number, the number of the call made for its layout. No call
    is made after the ``until`` instant (``time.perf_counter()``)."""
    from bbagent.harness.sandbox.compile_ahead import layout_key, start_compiling_ahead
    call_numbers: dict[tuple, int] = {}
    call_of: dict[int, int] = {}

    def calls():
        for number in range(start, end):
            if until is not None and time.perf_counter() >= until:
                return
            name, _, case = planned[number]
            compile_clock.rotate(number)
            key = (layout_key(name, case), compile_clock.held_configs())
            new = key not in call_numbers
            call_of[number] = call_numbers.setdefault(key, len(call_numbers))
            if new:
                yield functools.partial(_call_on_clones, served[name], case, send, stopwatch)
    return start_compiling_ahead(calls(), device, compile_clock.paused), call_of


def _call_on_clones(kernel, case, send, stopwatch: Stopwatch) -> None:
    from bbagent.harness.inputs import clone_value
    send(events.AheadCall(id=case.id))
    with stopwatch.part("ahead_inputs"):
        args, kwargs = clone_value(case.inputs())
    kernel(*args, **kwargs)
