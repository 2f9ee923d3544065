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
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode

from bbagent.harness.inputs import tensors_in
from bbagent.harness.ops import packet_name, value_mode
from bbagent.harness.checks.allowed import MAX_SEED_VALUES, SEED_DRAW, is_allowed

COMPARISONS = frozenset({"ne", "eq", "gt", "lt", "ge", "le"})


def allowed_spelling(func, args) -> str:
    """For a comparison of a one-element tensor with a number (``partial[0] != 0``), which an
    allowed host read does exactly: the spelling the kernel contract allows."""
    tensors = tensors_in(args)
    if packet_name(func) not in COMPARISONS or not tensors or any(t.numel() > 1 for t in tensors):
        return ""
    return ("; to test a one-element result on the host, read it back first with an allowed conversion and "
            "compare in Python: `t.item() != 0`, `bool(t)` or `int(t)` (not `t != 0`, which is a PyTorch "
            "comparison on the device)")


class LaunchCounter:
    """Counts Triton kernel launches, whichever way Python reaches them.

    On a GPU every launch ends in a call of the driver's launcher object
    (``driver.active.launcher_cls``): through ``JITFunction.run`` (``kernel[grid](...)``), an
    autotuner, or a cached ``CompiledKernel`` called as ``compiled[grid](...)`` or
    ``compiled.run(...)`` as libraries do to skip the JIT's argument handling. That call is counted.
    Under the interpreter there is no launcher: ``InterpretedFunction.run`` is counted. The Python
    wrappers (``JITFunction.run``, ``Autotuner``, ``Heuristics``) only mark "inside a launch", so that
    Triton's own tensor work (autotuning's benchmark buffers) does not look like candidate compute."""

    def __init__(self):
        self.launches = 0
        self.in_launch = 0
        self.counts_at = ""
        self.watch = None  # a harness.checks.runtime.CallWatch told each launch's stream (GPU)
        self.launcher = None  # the GPU driver's launcher class, once installed
        self.in_counted = 0  # inside a counted launch (the interpreter's own tensor work happens there)
        # while a call is recorded (harness.checks.in_use.Recording): each outermost counted launch as
        # ("launch", run, launcher, args, kwargs) and each aten call outside one as ("aten", func, args,
        # kwargs, result), in order
        self.recording: list | None = None

    def install(self, device: str = "cpu") -> None:
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.jit import JITFunction
        launcher = self.launcher = _launcher_class() if device == "cuda" else None
        counted, marked = [], [JITFunction, Autotuner, Heuristics]
        if launcher is not None:
            self.counts_at = f"{launcher.__module__}.{launcher.__qualname__}.__call__"
        else:  # the interpreter, or a Triton whose launcher this code does not know: count the JIT entry
            marked.remove(JITFunction)
            counted.append(JITFunction)
            self.counts_at = "JITFunction.run"
        try:
            from triton.runtime.interpreter import InterpretedFunction
            counted.append(InterpretedFunction)
        except ImportError:
            pass
        if launcher is not None:  # the launcher's arguments: gridX, gridY, gridZ, stream, function, ...
            launcher.__call__ = self._wrap(launcher.__call__, count=True, stream_at=3)
        for cls in counted + marked:
            cls.run = self._wrap(cls.run, count=cls in counted)

    def _wrap(self, original, count: bool, stream_at: int | None = None):
        counter = self

        def run(fn_self, *args, **kwargs):
            if kwargs.get("warmup"):  # compiles, launches nothing
                return original(fn_self, *args, **kwargs)
            if stream_at is not None and counter.watch is not None and len(args) > stream_at:
                counter.watch.on_launch(args[stream_at])
            counter.launches += int(count)
            if count and counter.recording is not None and not counter.in_counted:
                counter.recording.append(("launch", original, fn_self, args, kwargs))
            counter.in_launch += 1
            counter.in_counted += int(count)
            try:
                return original(fn_self, *args, **kwargs)
            finally:
                counter.in_launch -= 1
                counter.in_counted -= int(count)
        return run


def _launcher_class():
    """The class whose instances launch compiled kernels on the active GPU driver, or None."""
    try:
        from triton.runtime.driver import driver
        cls = driver.active.launcher_cls
    except Exception:  # noqa: BLE001 - no GPU driver, or another Triton layout
        return None
    return cls if isinstance(cls, type) and callable(getattr(cls, "__call__", None)) else None


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

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No: torch would wrap ``__torch_dispatch__`` to keep TorchDynamo out, importing it (seconds,
        in a sealed child) at the first call; the tests never run under ``torch.compile``. (Where
        torch wraps it anyway, the child loads TorchDynamo before it is sealed: ``load_lazy_parts``.)"""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if on_fake_tensors((args, kwargs, result)):
            return result
        if self.launches.recording is not None and not self.launches.in_counted:
            self.launches.recording.append(("aten", func, args, kwargs or {}, result))
        if not self.launches.in_launch:
            if self.launches.watch is not None:
                self.launches.watch.on_aten(func)
            allowed = ((is_allowed(func) and (func is not self.target or self.target_allowed))
                       or self._is_seed_draw(func, result))
            if not allowed and len(self.findings) < 20:
                line = self._candidate_line()
                self.findings.append({
                    "guard": "aten_compute",
                    "op": str(func),
                    "line": line,
                    "message": f"candidate called {func} (PyTorch compute) at "
                               f"{'line ' + str(line) if line else 'an unknown line'}; "
                               "compute must happen in a @triton.jit kernel" + allowed_spelling(func, args),
                })
        return result

    def _is_seed_draw(self, func, result) -> bool:
        """A random kernel takes its seed from the generator with a tiny ``randint`` or
        ``random_`` (as Inductor does); the values themselves must come from Triton."""
        return (self.target_random and packet_name(func) in SEED_DRAW.aten
                and packet_name(func) != packet_name(self.target)
                and sum(t.numel() for t in tensors_in(result)) <= MAX_SEED_VALUES)

    def _candidate_line(self) -> int | None:
        return candidate_line(self.candidate_file)


def on_fake_tensors(values) -> bool:
    """The call worked on tensors without data (``FakeTensor``): a compiler propagating shapes and
    dtypes (Helion's type propagation runs its kernel's tile code so, the first time a shape
    or dtype comes), never compute: no value exists to compute with."""
    return any(isinstance(t, FakeTensor) for t in tensors_in(values))


def candidate_line(candidate_file: str) -> int | None:
    """The line of the candidate's file that the current call came through, innermost first."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename == candidate_file:
            return frame.lineno
    return None

