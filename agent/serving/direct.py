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

The overloads' rules and the launch tracing are ``harness.launches`` (an exported package carries
them); the regions' tracing is here.
"""
from __future__ import annotations

from contextlib import nullcontext

from bbagent.agent.regions.extract import inputs_before
from bbagent.harness.interface import (LAUNCHED, OPAQUE, UNRECORDED, DirectKernel, DirectServing, is_allowed,
                                       launches_traced, path_said, untraceable)

__all__ = ["LAUNCHED", "OPAQUE", "DirectKernel", "DirectServing", "launches_traced", "path_said", "region_traced",
           "inline"]


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

    recorded: list[int] = []

    def forward(*args):
        with launches_traced() as traced:
            result = model(*args)
        recorded.append(traced.launches)
        if isinstance(result, (tuple, list)):
            return tuple(output.contiguous() for output in result)
        return result.contiguous()
    try:
        with detect_fake_mode(values) or nullcontext(), enable_python_dispatcher():
            plain = make_fx(forward, tracing_mode="real")(*values)
            if not any(recorded):
                return None, UNRECORDED
            called = sorted({str(node.target) for node in plain.graph.nodes if node.op == "call_function"
                             and isinstance(node.target, torch._ops.OpOverload) and not is_allowed(node.target)})
            if called:
                return None, f"its forward calls torch's compute ({', '.join(called)})"
            from torch._inductor.decomposition import select_decomp_table
            traced = make_fx(torch.func.functionalize(forward, remove="mutations_and_views"), select_decomp_table(),
                             tracing_mode="real")(*values)
    except Exception as exc:  # noqa: BLE001 - the region keeps its opaque call, with why
        return None, untraceable(exc)
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
