"""Approved kernels that inductor's generated code launches itself, with no Python in between.

A kernel's work is its Triton launches; the wrapper around them only allocates, views and copies
(the kernel contract). When torch.compile traces a model, each call reaches functionalization
(``FunctionalTensorMode``) before inductor's decompositions; while served, a served overload has
a rule there (``OpOverload.py_impl``) that runs the approved wrapper itself on the traced tensors,
with each launch (``kernel[grid](...)``, through an autotuner or not) recorded as torch's Triton
kernel node (``torch.library.wrap_triton``) instead of run. Inductor then lowers that node as a
user-defined Triton kernel and launches the judged kernel from its own code, as it does for
``torch.library.triton_op``; the wrapper's allocations and views become inductor's own.

The same for an approved answer to a region problem (``agent.serving.compiled``): where a graph
holds its region, the answer's ``forward`` is traced the same way into the graph in the region's
place (``inlined``), when it is nothing but Triton launches and plumbing; one that also calls
torch's compute (an ``addmm``, a convolution) keeps the opaque call.

Where the rule cannot (a dtype the kernel was not tested on, another device, a wrapper that reads
a tensor's address or values on the host, or calls compute of torch's), it steps aside: the call
is functionalized as always and reaches inductor as the overload, which the post-grad pass then
swaps for the opaque twin that calls the served kernel (today's path); ``declined`` says why,
per overload.

On the CPU nothing is launched by inductor: its CPU code cannot launch Triton kernels, and the
interpreter's kernels cannot be traced.
"""
from __future__ import annotations

import inspect
import threading
from collections import Counter
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from bbagent.agent.regions.extract import inputs_before
from bbagent.harness.interface import is_allowed, tensors_in

if TYPE_CHECKING:
    from torch._ops import OpOverload

LAUNCHED = "launched by inductor's code"
OPAQUE = "served"  # an opaque twin's call out of inductor's code (``agent.serving.compiled``)
_TRACING = threading.local()
_PATCHED: list = []  # [Triton's own KernelInterface.__getitem__, how many traces use the patch]


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

    @property
    def names(self) -> list[str]:
        return sorted(kernel.op for kernel in self.kernels.values())

    def install(self) -> dict[str, str]:
        """Install a rule per overload; why each overload that cannot have one is left out."""
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
        return left_out

    def uninstall(self) -> None:
        from torch._subclasses.functional_tensor import FunctionalTensorMode
        for overload in self.installed:
            overload.python_key_table.pop(FunctionalTensorMode, None)
            overload._dispatch_cache.clear()
        self.installed = []

    def under_compile(self, op: str) -> str | None:
        """How compiled code runs ``op`` where it is served direct: launched, and where it was not."""
        kernel = next((k for k in self.kernels.values() if k.op == op), None)
        return None if kernel is None else path_said(kernel.sites, kernel.declined, LAUNCHED)


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
                with mode, launches_traced():
                    result = kernel.function(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - this call alone is left to the opaque path, with why
                why = _untraceable(exc)
            else:
                if _building_a_graph():  # not the pass that only reads the outputs' metadata
                    kernel.sites += 1
                return result
        if _building_a_graph():
            kernel.declined[why] += 1
        return mode.__torch_dispatch__(kernel.overload, (), args, kwargs)
    return rule


def _building_a_graph() -> bool:
    """Whether the trace records a graph (AOT autograd first runs the function once, on fake
    tensors alone, to learn its outputs)."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode
    return get_proxy_mode() is not None


def _untraceable(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return f"its wrapper cannot be traced ({type(exc).__name__}: {lines[0][:120] if lines else ''})"


@contextmanager
def launches_traced():
    """While inside, a Triton launch ``kernel[grid](...)`` on this thread is recorded as torch's
    Triton kernel node (``wrap_triton``) where tracing asks for it, instead of run."""
    before = getattr(_TRACING, "on", False)
    _TRACING.on = True
    _patch_launches()
    try:
        yield
    finally:
        _unpatch_launches()
        _TRACING.on = before


def _patch_launches() -> None:
    """``KernelInterface.__getitem__`` (``kernel[grid]`` of a ``@triton.jit`` function, an autotuner,
    a heuristics wrapper) goes through ``wrap_triton`` inside ``launches_traced``; elsewhere, and
    where torch runs the launch itself (``is_wrap_triton_enabled`` false), it is Triton's own."""
    if _PATCHED:
        _PATCHED[0][1] += 1
        return
    from torch._library.triton import is_wrap_triton_enabled, wrap_triton
    from triton.runtime.jit import KernelInterface
    original = KernelInterface.__getitem__

    def getitem(self, grid):
        if getattr(_TRACING, "on", False) and is_wrap_triton_enabled():
            launch = wrap_triton(self)[grid]
            return lambda *args, **kwargs: launch(*args, **{**_defaults_left(self, len(args), kwargs), **kwargs})
        return original(self, grid)
    KernelInterface.__getitem__ = getitem
    _PATCHED.append([original, 1])


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
    _PATCHED[0][1] -= 1
    if _PATCHED[0][1] == 0:
        from triton.runtime.jit import KernelInterface
        KernelInterface.__getitem__ = _PATCHED.pop()[0]


def region_traced(answer, values: list):
    """``answer``'s ``forward`` (``agent.serving.compiled.RegionAnswer``) traced on ``values`` (the
    region's inputs as the graph's fake tensors): a functional graph of its launches and plumbing,
    each output contiguous; or why it cannot go in the region's place (it holds weights or state of
    its own, calls torch's compute, or cannot be traced)."""
    import torch
    from torch._dispatch.python import enable_python_dispatcher
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx
    model = answer.model_new()
    if any(True for _ in model.parameters()) or any(True for _ in model.buffers()):
        return None, "its ModelNew holds weights or buffers of its own"

    def forward(*args):
        with launches_traced():
            result = model(*args)
        if isinstance(result, (tuple, list)):
            return tuple(output.contiguous() for output in result)
        return result.contiguous()
    try:
        with detect_fake_mode(values) or nullcontext(), enable_python_dispatcher():
            plain = make_fx(forward, tracing_mode="real")(*values)
            called = sorted({str(node.target) for node in plain.graph.nodes if node.op == "call_function"
                             and isinstance(node.target, torch._ops.OpOverload) and not is_allowed(node.target)})
            if called:
                return None, f"its forward calls torch's compute ({', '.join(called)})"
            from torch._inductor.decomposition import select_decomp_table
            traced = make_fx(torch.func.functionalize(forward, remove="mutations_and_views"), select_decomp_table(),
                             tracing_mode="real")(*values)
    except Exception as exc:  # noqa: BLE001 - the region keeps its opaque call, with why
        return None, _untraceable(exc)
    return traced, None


def _no_writes_to_inputs(graph) -> None:
    """Drop the copies back into the region's inputs that functionalization adds where torch could not
    tell which pointers a Triton kernel writes (it then clones every one and writes each back): the
    answer was judged not to change its inputs."""
    import torch
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is torch.ops.aten.copy_.default \
                and node.args[0].op == "placeholder" and not node.users:
            graph.erase_node(node)
    graph.eliminate_dead_code()


def inline(graph, match, traced) -> str | None:
    """``traced`` (``region_traced``) copied into ``graph`` in the place of ``match``'s nodes; why
    not where its outputs' shapes or dtypes are not the region's."""
    placeholders = [node for node in traced.graph.nodes if node.op == "placeholder"]
    output = next(node for node in traced.graph.nodes if node.op == "output").args[0]
    results = list(output) if isinstance(output, (tuple, list)) else [output]
    if len(results) != len(match.outputs):
        return f"its forward returns {len(results)} outputs, the region {len(match.outputs)}"
    for got, want in zip(results, match.outputs):
        g, w = got.meta.get("val"), want.meta.get("val")
        if g is None or w is None or tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype:
            return "its outputs' shapes or dtypes are not the region's"
    _no_writes_to_inputs(traced.graph)
    members = set(match.members)
    inputs_before(match)
    with graph.inserting_before(match.members[0]):
        copied = graph.graph_copy(traced.graph, dict(zip(placeholders, match.inputs)))
    copied = list(copied) if isinstance(copied, (tuple, list)) else [copied]
    for old, new in zip(match.outputs, copied):
        old.replace_all_uses_with(new, delete_user_cb=lambda user: user not in members)
    for node in reversed(match.members):
        graph.erase_node(node)
    return None
