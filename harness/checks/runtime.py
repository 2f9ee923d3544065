"""What a candidate's call did besides return its result: the run-time backing of the static rules.

``CallWatch.wrap`` wraps the kernel the harness calls (every test, the timing, the rechecks):

* **streams** (GPU): the stream current when the call began is the call's stream. Every Triton
  launch of the call must be on it (the launcher's own stream argument, ``guards.LaunchCounter``),
  every aten operator it calls outside a launch must run with it current (``guards.AtenRecorder``),
  and the call must leave it current. Work on another stream escapes the synchronisation before
  the checks and the events around the timed call. Launches inside Triton's own autotuning
  benchmark are Triton's (``exempt``).
* **threads**: once the call has returned, no other thread may be running the candidate's code
  (the audit hook stops a thread the candidate's code starts as it starts, ``containment``; this
  sees one started any other way). With ``light`` (the timing loop, where a scan per call would
  add host time to the measured calls) the scan runs once per timed test instead (``scan``).
* **the judge** (``harness.checks.integrity.JudgeState``), checked by the caller before it judges.

Findings collect in ``findings``; ``failure()`` hands the first to the test as its failure.
"""
from __future__ import annotations

import functools
import gc
import sys
import threading
from types import FrameType
from contextlib import contextmanager
from typing import Callable

import torch

from bbagent.harness.checks.integrity import JudgeState, tampering_message

STREAM_ADVICE = ("run all work on the current stream: Triton launches there by default; do not create, pick or "
                 "switch streams")


class CallWatch:
    def __init__(self, candidate_file: str, device: str, judge: JudgeState | None = None,
                 exempt: Callable[[], bool] = lambda: False):
        self.candidate_file = candidate_file
        self.cuda = device == "cuda"
        self.judge = judge
        self.exempt = exempt
        self.findings: list[dict] = []
        self.expected_stream: int | None = None  # the raw stream of the call under way (GPU)
        self.light = False
        self._current_frames = sys._current_frames
        self._raw_stream = torch._C._cuda_getCurrentRawStream if self.cuda else None

    def current_stream(self) -> int:
        if self._raw_stream is None:
            raise RuntimeError("the current stream is asked on a GPU only")
        return self._raw_stream(torch.cuda.current_device())

    def wrap(self, kernel: Callable) -> Callable:
        watch = self

        @functools.wraps(kernel)
        def watched(*args, **kwargs):
            outer = watch.expected_stream
            if watch.cuda:
                watch.expected_stream = watch.current_stream()
            try:
                return kernel(*args, **kwargs)
            finally:
                if watch.cuda and watch.current_stream() != watch.expected_stream:
                    watch.add("side_stream", f"the call made stream {watch.current_stream():#x} current and left it "
                                             f"so (stream {watch.expected_stream:#x} was current when it began); "
                                             + STREAM_ADVICE)
                watch.expected_stream = outer
                if not watch.light:
                    watch.scan()
        return watched

    def add(self, error_kind: str, message: str) -> None:
        if len(self.findings) < 8:
            self.findings.append({"error_kind": error_kind, "message": message})

    def on_launch(self, stream) -> None:
        """A Triton launch on ``stream`` (the launcher's argument)."""
        expected = self.expected_stream
        if expected is not None and isinstance(stream, int) and stream != expected and not self.exempt():
            self.add("side_stream", f"a Triton kernel was launched on stream {stream:#x}, not on the call's stream "
                                    f"{expected:#x}; " + STREAM_ADVICE)

    def on_aten(self, func) -> None:
        """An aten operator the candidate called outside a launch (GPU: on which stream)."""
        expected = self.expected_stream
        if expected is not None and not self.exempt():
            current = self.current_stream()
            if current != expected:
                self.add("side_stream", f"{func} ran on stream {current:#x}, not on the call's stream {expected:#x}; "
                                        + STREAM_ADVICE)

    def scan(self) -> None:
        """Threads other than this one running the candidate's code. This thread's own frame is
        dropped from the listing first: held in a local of its own, it made a reference cycle that
        kept the caller's frames (a test's inputs and outputs, gigabytes for a program) alive until
        the garbage collector happened to run."""
        frames = self._current_frames()
        frames.pop(threading.get_ident(), None)
        for top in frames.values():
            frame: FrameType | None = top
            depth = 0
            while frame is not None and depth < 200:
                if frame.f_code.co_filename == self.candidate_file:
                    self.add("stray_thread", f"after the call returned, another thread was running the kernel's code "
                                             f"(line {frame.f_lineno}, in {frame.f_code.co_name}); a kernel computes on "
                                             "the calling thread and leaves no thread behind")
                    return
                frame, depth = frame.f_back, depth + 1

    def failure(self) -> dict | None:
        """The first finding since the last call, as a test's failure (the findings are cleared)."""
        if not self.findings:
            return None
        first = dict(self.findings[0])
        self.findings.clear()
        return first

    def judge_changes(self, when: str, deep: bool = False) -> dict | None:
        """A ``tampering`` failure where the judge's state changed, else None."""
        if self.judge is None:
            return None
        changes = self.judge.changes(deep=deep)
        if not changes:
            return None
        return {"error_kind": "tampering", "message": tampering_message(changes, when), "judge_changed": True}


@contextmanager
def collector_paused():
    """No garbage collection inside: a finaliser of the candidate's objects (``__del__`` of a cycle)
    cannot run while the harness judges."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
