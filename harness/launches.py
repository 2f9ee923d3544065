"""Approved kernels that inductor's generated code launches itself, with no Python in between
(``agent.serving.direct`` explains the path; this is the part an exported package carries too).

While installed, a served overload has a functionalization rule (``OpOverload.py_impl``) that runs
the approved wrapper itself on the traced tensors, with each Triton launch recorded as torch's
Triton kernel node (``torch.library.wrap_triton``) instead of run; inductor then launches the
judged kernel from its own code. Where the rule cannot (a dtype the kernel was not tested on,
another device, a wrapper that reads a tensor's address or values on the host), it steps aside and
the call reaches inductor as the overload; ``declined`` says why, per overload.

Imports torch, triton and the standard library only: an exported package runs it without bbagent.
"""
from __future__ import annotations

import inspect
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from bbagent.harness.inputs import tensors_in

if TYPE_CHECKING:
    from torch._ops import OpOverload

LAUNCHED = "launched by inductor's code"
OPAQUE = "served"  # an opaque twin's call out of inductor's code (``agent.serving.compiled``)
_TRACING = threading.local()
_PATCHED: dict = {}  # while patched: Triton's own "getitem" and "run", and how many traces use the patch ("users")
# the keywords a launch through ``JITFunction.run`` may add that torch's traced launch takes as a
# config (the rest of its keywords must be the kernel's parameters), and those it drops at their defaults
_TRACED_OPTIONS = frozenset({"num_warps", "num_stages"})
_DEFAULT_OPTIONS = {"launch_cooperative_grid": False, "ptx_options": None}


@dataclass
class DirectKernel:
    """One served overload: its name, the function with its calling convention (the approved
    kernel behind ``harness.adapters.serving``), the dtypes it was tested on (empty: any) and the
    device type it serves."""
    op: str
    overload: OpOverload
    function: Callable
    dtypes: frozenset = frozenset()
    device_type: str = "cuda"
    sites: int = 0  # calls put into compiled graphs as its launches
    declined: Counter = field(default_factory=Counter)

    def takes(self, args, kwargs) -> str | None:
        """Why the call cannot be traced as this kernel's launches, or None."""
        tensors = tensors_in((args, kwargs))
        if not tensors:
            return "no tensor argument"
        if any(t.device.type != self.device_type for t in tensors):
            return f"a tensor not on {self.device_type}"
        if self.dtypes and tensors[0].dtype not in self.dtypes:
            return f"dtype {str(tensors[0].dtype).removeprefix('torch.')} not tested"
        return None


class DirectServing:
    """The functionalization rules of ``kernels`` (by overload), installed and removed together."""

    def __init__(self, kernels: list[DirectKernel]):
        self.kernels = {kernel.overload: kernel for kernel in kernels}
        self.installed: list = []
        self._floats: Callable[[], None] | None = None  # puts inductor's float typing back

    @property
    def names(self) -> list[str]:
        return sorted(kernel.op for kernel in self.kernels.values())

    def install(self, regions: bool = False) -> dict[str, str]:
        """Install a rule per overload; why each overload that cannot have one is left out. Where any
        launch may be traced in (a rule installed, or ``regions``: region answers' launches), floats
        reach the kernels as Triton passes them until ``uninstall``."""
        from torch._subclasses.functional_tensor import FunctionalTensorMode
        left_out = {}
        for overload, kernel in self.kernels.items():
            if FunctionalTensorMode in overload.python_key_table:
                left_out[kernel.op] = "torch has its own functionalization rule for it"
                continue
            overload.py_impl(FunctionalTensorMode)(_rule(kernel))
            self.installed.append(overload)
        for overload in list(self.kernels):
            if overload not in self.installed:
                del self.kernels[overload]
        if self.installed or regions:
            self._floats = floats_as_triton_passes_them()
        return left_out

    def uninstall(self) -> None:
        from torch._subclasses.functional_tensor import FunctionalTensorMode
        for overload in self.installed:
            overload.python_key_table.pop(FunctionalTensorMode, None)
            overload._dispatch_cache.clear()
        self.installed = []
        if self._floats is not None:
            self._floats()
            self._floats = None

    def under_compile(self, op: str) -> str | None:
        """How compiled code runs ``op`` where it is served direct: launched, and where it was not."""
        kernel = next((k for k in self.kernels.values() if k.op == op), None)
        return None if kernel is None else path_said(kernel.sites, kernel.declined, LAUNCHED)


def floats_as_triton_passes_them() -> Callable[[], None]:
    """Until the returned function is called, inductor passes a Python float argument of a Triton
    kernel it launches as fp32, as Triton's own launch does and as the kernel was judged; by default
    (``config._use_fp64_for_unbacked_floats``) it passes fp64, so that a kernel computing with
    ``eps`` may run in another precision, or not compile (``tl.sqrt_rn`` of fp64: a Helion
    layer_norm on the H200 failed the user's compiled model so). The same setting types floats read
    with ``.item()`` in inductor's own kernels, which run in fp32 too meanwhile."""
    from torch._inductor import config
    if not hasattr(config, "_use_fp64_for_unbacked_floats"):  # a torch that passes fp32 anyway
        return lambda: None
    before = config._use_fp64_for_unbacked_floats
    config._use_fp64_for_unbacked_floats = False
    return lambda: setattr(config, "_use_fp64_for_unbacked_floats", before)


def path_said(launched: int, declined: Counter, unmet: str) -> str:
    """How compiled code ran a kernel or region answer that was ``launched`` (traced in) so many
    times and kept the opaque call where ``declined`` says why; ``unmet`` where neither happened."""
    if not declined:
        return LAUNCHED if launched else unmet
    reasons = "; ".join(f"{why} ({count}x)" for why, count in declined.most_common())
    return f"{LAUNCHED}; an opaque call where {reasons}" if launched else f"{OPAQUE} as an opaque call: {reasons}"


def _rule(kernel: DirectKernel):
    def rule(mode, *args, **kwargs):
        why = kernel.takes(args, kwargs)
        if why is None:
            try:
                with mode, launches_traced() as traced:
                    result = kernel.function(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - this call alone is left to the opaque path, with why
                why = untraceable(exc)
                if _symbolic(args, kwargs):  # Helion binds on concrete sizes; a Triton wrapper may not trace on them
                    why = f"under dynamic shapes {why}"
            else:
                if traced.launches == 0 and tensors_in(result):
                    # no launch went through kernel[grid] or JITFunction.run (a launcher of its own, say):
                    # the graph would hold the outputs' allocation alone, never their values
                    why = UNRECORDED
                else:
                    if _building_a_graph():  # not the pass that only reads the outputs' metadata
                        kernel.sites += 1
                    return result
        if _building_a_graph():
            kernel.declined[why] += 1
        return mode.__torch_dispatch__(kernel.overload, (), args, kwargs)
    return rule


def _symbolic(args, kwargs) -> bool:
    """Whether a tensor of the call has a size the trace keeps symbolic (dynamic shapes)."""
    return any(not isinstance(size, int) for tensor in tensors_in((args, kwargs)) for size in tensor.shape)


def _building_a_graph() -> bool:
    """Whether the trace records a graph (AOT autograd first runs the function once, on fake
    tensors alone, to learn its outputs)."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode
    return get_proxy_mode() is not None


def untraceable(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return f"its wrapper cannot be traced ({type(exc).__name__}: {lines[0][:120] if lines else ''})"


UNRECORDED = "no launch was recorded (only kernel[grid](...) and kernel.run(..., grid=...) of Triton kernels are traced in)"


@dataclass
class Traced:
    """What ``launches_traced`` saw: the launches recorded as Triton kernel nodes."""
    launches: int = 0


@contextmanager
def launches_traced():
    """While inside, a Triton launch on this thread, ``kernel[grid](...)`` or Helion's
    ``kernel.run(..., grid=...)``, is recorded as torch's Triton kernel node (``wrap_triton``) where
    tracing asks for it, instead of run; yields a ``Traced`` counting them."""
    before, counted = getattr(_TRACING, "on", False), getattr(_TRACING, "traced", None)
    _TRACING.on, _TRACING.traced = True, Traced()
    _patch_launches()
    try:
        yield _TRACING.traced
    finally:
        _unpatch_launches()
        _TRACING.on, _TRACING.traced = before, counted


def _patch_launches() -> None:
    """``KernelInterface.__getitem__`` (``kernel[grid]`` of a ``@triton.jit`` function, an autotuner,
    a heuristics wrapper) and ``JITFunction.run`` (how Helion's host code launches) go through
    ``wrap_triton`` inside ``launches_traced``; elsewhere, and where torch runs the launch itself
    (``is_wrap_triton_enabled`` false), they are Triton's own. A ``kernel[grid]`` recorded never
    reaches ``run``, so no launch is counted twice."""
    if _PATCHED:
        _PATCHED["users"] += 1
        return
    from torch._library.triton import is_wrap_triton_enabled, wrap_triton
    from triton.runtime.jit import JITFunction, KernelInterface
    getitem_of, run_of = KernelInterface.__getitem__, JITFunction.run

    def tracing() -> bool:
        return getattr(_TRACING, "on", False) and is_wrap_triton_enabled()

    def getitem(self, grid):
        if tracing():
            _TRACING.traced.launches += 1
            launch = wrap_triton(self)[grid]
            return lambda *args, **kwargs: launch(*args, **{**_defaults_left(self, len(args), kwargs), **kwargs})
        return getitem_of(self, grid)

    def run(self, *args, grid, warmup, **kwargs):
        if tracing() and not warmup:
            kwargs = _traced_options(self, kwargs)
            _TRACING.traced.launches += 1
            wrap_triton(self)[grid](*args, **{**_defaults_left(self, len(args), kwargs), **kwargs})
            return None
        return run_of(self, *args, grid=grid, warmup=warmup, **kwargs)
    KernelInterface.__getitem__, JITFunction.run = getitem, run
    _PATCHED.update(getitem=getitem_of, run=run_of, users=1)


def _traced_options(kernel, kwargs: dict) -> dict:
    """The keywords of a ``JITFunction.run`` launch that torch's traced launch is given: the
    kernel's parameters and the configs it takes (``num_warps``, ``num_stages``), with Triton's
    launch options left out where they are at their defaults. Any other option (``maxnreg``, a
    cooperative grid) cannot be traced: ValueError, and the call keeps its opaque path."""
    parameters = set(inspect.signature(kernel.fn).parameters)
    kept = {}
    for name, value in kwargs.items():
        if name in _DEFAULT_OPTIONS and value == _DEFAULT_OPTIONS[name]:
            continue
        if name not in parameters and name not in _TRACED_OPTIONS:
            raise ValueError(f"the launch option {name}={value!r} cannot be traced")
        kept[name] = value
    return kept


def _defaults_left(kernel, positional: int, given: dict) -> dict:
    """The parameters of ``kernel``'s function (under any autotuners and heuristics) that a launch
    with ``positional`` arguments and the keywords ``given`` leaves to their defaults, and that no
    autotuner config or heuristic sets, with those defaults. Torch's traced launch does not fill
    them in (inductor then compiles the kernel with None for, say, a ``GROUP_M: tl.constexpr = 8``):
    they are passed as keywords."""

    from triton.runtime.jit import JITFunction
    set_by_wrappers: set[str] = set()
    while not isinstance(kernel, JITFunction) and hasattr(kernel, "fn"):  # an autotuner or heuristics wrapper
        set_by_wrappers.update(*(config.kwargs for config in getattr(kernel, "configs", ())))
        set_by_wrappers.update(getattr(kernel, "values", {}))
        kernel = kernel.fn
    parameters = list(inspect.signature(kernel.fn).parameters.values())[positional:]
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty
            and p.name not in given and p.name not in set_by_wrappers}


def _unpatch_launches() -> None:
    if not _PATCHED:
        return
    _PATCHED["users"] -= 1
    if _PATCHED["users"] == 0:
        from triton.runtime.jit import JITFunction, KernelInterface
        KernelInterface.__getitem__, JITFunction.run = _PATCHED["getitem"], _PATCHED["run"]
        _PATCHED.clear()
