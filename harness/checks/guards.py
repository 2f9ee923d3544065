"""Run-time guards while a candidate kernel runs.

* ``LaunchCounter`` counts Triton kernel launches (compiled and interpreted), so a
  test can prove that a Triton kernel actually ran.
* ``AtenRecorder`` records aten operators the candidate calls outside a Triton
  launch. Allocation, views and metadata are allowed (``harness.checks.allowed``); anything
  else is compute done by PyTorch instead of the kernel, and is reported with the
  candidate's line that caused it. The target operator itself is never allowed. A random
  op's kernel may draw a few values with ``randint``/``random_`` to seed its Triton kernel.
"""
from __future__ import annotations

import traceback
from torch.utils._python_dispatch import TorchDispatchMode

from harness.inputs import tensors_in
from harness.ops import packet_name, value_mode
from harness.checks.allowed import ALLOWED_ATEN, MAX_SEED_VALUES, SEED_DRAW

class LaunchCounter:
    """Counts launches by wrapping the ``run`` method of Triton's kernel classes."""

    def __init__(self):
        self.launches = 0
        self.in_launch = 0

    def install(self) -> None:
        """Wrap JITFunction/InterpretedFunction.run (counted launches) and the Autotuner and
        Heuristics wrappers (not counted: they call the counted ``run`` themselves, and the
        autotuner's own benchmarking allocations must not look like candidate compute)."""
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.jit import JITFunction
        counted = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction
            counted.append(InterpretedFunction)
        except ImportError:
            pass
        for cls in counted + [Autotuner, Heuristics]:
            cls.run = self._wrap(cls.run, count=cls in counted)

    def _wrap(self, original, count: bool):
        counter = self

        def run(fn_self, *args, **kwargs):
            if kwargs.get("warmup"):
                return original(fn_self, *args, **kwargs)
            counter.launches += int(count)
            counter.in_launch += 1
            try:
                return original(fn_self, *args, **kwargs)
            finally:
                counter.in_launch -= 1
        return run


class AtenRecorder(TorchDispatchMode):
    """Record disallowed aten calls made by candidate code (not by Triton itself)."""

    def __init__(self, target, launch_counter: LaunchCounter, candidate_file: str):
        super().__init__()
        self.target = target
        self.launches = launch_counter
        self.candidate_file = candidate_file
        self.findings: list[dict] = []
        # An op whose values are unspecified (empty*) is allocation itself: the kernel may call it.
        self.target_allowed = value_mode(target) == "metadata"
        self.target_random = value_mode(target) == "distribution"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not self.launches.in_launch:
            allowed = ((packet_name(func) in ALLOWED_ATEN and (func is not self.target or self.target_allowed))
                       or self._is_seed_draw(func, result))
            if not allowed and len(self.findings) < 20:
                line = self._candidate_line()
                self.findings.append({
                    "guard": "aten_compute",
                    "op": str(func),
                    "line": line,
                    "message": f"candidate called {func} (PyTorch compute) at "
                               f"{'line ' + str(line) if line else 'an unknown line'}; "
                               "compute must happen in a @triton.jit kernel",
                })
        return result

    def _is_seed_draw(self, func, result) -> bool:
        """A random kernel takes its seed from the generator with a tiny ``randint`` or
        ``random_`` (as Inductor does); the values themselves must come from Triton."""
        return (self.target_random and packet_name(func) in SEED_DRAW.aten
                and packet_name(func) != packet_name(self.target)
                and sum(t.numel() for t in tensors_in(result)) <= MAX_SEED_VALUES)

    def _candidate_line(self) -> int | None:
        for frame in reversed(traceback.extract_stack()):
            if frame.filename == self.candidate_file:
                return frame.lineno
        return None

