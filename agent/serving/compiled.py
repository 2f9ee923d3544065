"""Approved kernels under ``torch.compile``: inductor lowers aten operators itself and never calls
the kernels ``enable`` registers for them, so while they are enabled the graph inductor receives
is changed to call them.

Each served functional overload gets an opaque twin, ``bbagent_served::<name>_<overload>`` (its
schema the overload's, its shapes from the overload's own meta function), whose implementation
calls the overload through the dispatcher: that reaches the served kernel, with its fallbacks and
its counter, and counts one compiled call. Inductor keeps a custom operator as it is (a call out
of its generated code). Two changes to inductor, undone by ``uninstall``:

* its post-grad custom pass (``torch._inductor.config.post_grad_custom_pre_pass``; a pass the user
  set there runs first) swaps each call of a served overload for its twin;
* a served overload inductor would decompose before that pass (``gelu`` into ``erf`` and
  ``mul``) is taken out of its decomposition table, so that the call is still there to swap.

An approved answer to a region problem (``bbagent regions``; its text names the region's hash,
``REGION_HASH``) gets a twin too, ``bbagent_served::region_<hash>``, taking the region's inputs and
returning its outputs through the answer's ``ModelNew`` (its shapes from the problem's ``Model``):
the same pass finds the regions of each graph (``agent.regions.spanning.candidates``: those across
matrix products first) and puts one call of the twin where a region of that hash stands, before it
swaps single overloads.

On a GPU both go further where they can (``agent.serving.direct``): a served overload is traced
into the graph as its kernel's Triton launches, and a region answer made of Triton launches and
plumbing alone is traced into the region's place, so that inductor's code launches the judged
kernels itself; the twins stay for every call that cannot be (``direct.py`` says which).

Only graphs compiled while the kernels are enabled are changed; a function compiled before keeps
its code until it is compiled again (``torch._dynamo.reset()``). Under CUDA graphs
(``mode="reduce-overhead"``) a replay runs no Python: the calls counted are those that ran outside
a replay (warm-up and capture), while the kernel runs in every replay.
"""
from __future__ import annotations

import hashlib
import operator
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeGuard

from bbagent.agent.regions.extract import inputs_before
from bbagent.agent.regions.spanning import candidates
from bbagent.agent.serving.direct import (LAUNCHED, OPAQUE, DirectKernel, DirectServing, inline, path_said,
                                          region_traced)
from bbagent.harness.interface import op_name, tensor_arguments

if TYPE_CHECKING:
    from torch._ops import OpOverload

NAMESPACE = "bbagent_served"
PASS_FORMAT = "3"  # what this module puts in a graph: a change to it must not meet graphs cached before it


def is_served(status: str | None) -> TypeGuard[str]:
    """Whether an ``under_compile`` or region status says compiled code runs the kernel."""
    return status is not None and status.startswith((OPAQUE, LAUNCHED))


@dataclass
class RegionAnswer:
    """An approved answer to a region problem: the problem's key, the region's hash, the answer's
    ``ModelNew``, the problem's module (its ``Model`` and ``get_inputs``) and the answer file's digest."""
    key: str
    hash: str
    model_new: type
    problem: ModuleType
    sha256: str = ""
    over_inductor: float | None = None  # its speedup over torch.compile on its own problem, as judged


class CompiledServing:
    """The twins of ``overloads`` (``OpOverload`` by name) and of ``regions`` (by hash), the
    functionalization rules of ``direct`` (``agent.serving.direct``), and the changes to inductor
    that route compiled graphs to them; ``calls`` counts compiled calls of the twins per overload
    name and per region answer's key. ``fingerprint`` names the files served (inductor's caches key
    compiled graphs by it). With ``inline_regions`` a region answer is traced into the graph where it
    can be. ``over_inductor``: each overload's own speedup over torch.compile, as judged."""

    def __init__(self, overloads: Mapping[str, OpOverload], regions: dict[str, RegionAnswer] | None = None,
                 direct: list[DirectKernel] | None = None, fingerprint: str = "", inline_regions: bool = False,
                 over_inductor: dict[str, float | None] | None = None):
        import torch
        self.calls: Counter = Counter()
        self.direct = DirectServing(direct or [])
        self.direct_left_out: dict[str, str] = {}
        self.region_answers = {answer.hash: answer for answer in (regions or {}).values()}
        self.inline_regions, self.fingerprint = inline_regions, fingerprint
        self.inlined: Counter = Counter()  # region answer's key -> regions traced into graphs
        self.over_inductor = over_inductor or {}  # an overload's speedup over torch.compile alone, as judged
        self.region_declined: dict[str, Counter] = {}
        self.library = torch.library.Library(NAMESPACE, "FRAGMENT")
        self.destroyed = False  # the library, by uninstall()
        self.twins = {overload: self._twin(name, overload) for name, overload in overloads.items()
                      if _functional(overload)}
        self.region_twins = {answer.hash: self._region_twin(answer) for answer in (regions or {}).values()}
        self.region_keys = {answer.hash: answer.key for answer in (regions or {}).values()}
        self.removed: list[tuple[dict, object, object]] = []
        self.previous_pass: Any = None  # whatever inductor's config held: a pass, a list of them, None
        self.installed = False

    @property
    def names(self) -> list[str]:
        """The overloads and region answers served under torch.compile."""
        return sorted(op_name(overload) for overload in self.twins) + sorted(self.region_keys.values())

    def region_status(self, key: str) -> str:
        """How compiled code runs the region answer ``key``: launched by inductor's code, an opaque
        call (``OPAQUE``), or both, with why."""
        return path_said(self.inlined[key], self.region_declined.get(key, Counter()), OPAQUE)

    def under_compile(self, op: str) -> str | None:
        """How compiled code runs the served overload ``op``, or None where it does not."""
        if op in self.direct_left_out or op not in self.direct.names:
            return OPAQUE if op in self.names else None
        return self.direct.under_compile(op)

    def sites(self) -> dict[str, int]:
        """Per overload and region answer: calls traced into compiled graphs as its launches."""
        return {**{k.op: k.sites for k in self.direct.kernels.values()}, **dict(self.inlined)}

    def _region_twin(self, answer: RegionAnswer):
        import torch
        with torch.device("meta"):
            drawn = list(answer.problem.get_inputs())
            outputs = answer.problem.Model()(*drawn)
        count = len(outputs) if isinstance(outputs, (tuple, list)) else 1
        returns = "Tensor" if count == 1 else f"({', '.join(['Tensor'] * count)})"
        name = f"region_{answer.hash}"
        self.library.define(f"{name}({', '.join(f'Tensor in{j}' for j in range(len(drawn)))}) -> {returns}")
        reference, built, calls = answer.problem.Model(), {}, self.calls

        def implementation(*args):
            device = args[0].device
            if device not in built:  # built and moved once per device
                built[device] = answer.model_new().to(device)
            calls[answer.key] += 1
            return _contiguous(built[device](*args), count)

        def shapes(*args):
            return _contiguous(reference(*args), count)
        return self._define(name, implementation, shapes)

    def _twin(self, name: str, overload):
        twin_name = name.removeprefix("aten.").replace(".", "_")
        self.library.define(f"{twin_name}({str(overload._schema).split('(', 1)[1]}")
        calls = self.calls

        def implementation(*args, **kwargs):
            calls[name] += 1
            return _all_contiguous(overload(*args, **kwargs))

        def shapes(*args, **kwargs):
            return _all_contiguous(overload(*args, **kwargs))
        return self._define(twin_name, implementation, shapes)

    def _define(self, name: str, implementation, shapes):
        """The twin ``name`` (its schema defined already): ``implementation`` on every device,
        ``shapes`` on fake tensors; its ``OpOverload``."""
        import torch
        self.library.impl(name, implementation, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{name}", shapes, lib=self.library)
        return getattr(getattr(torch.ops, NAMESPACE), name).default

    def install(self) -> None:
        from torch._inductor import config, decomposition
        self.previous_pass = config.post_grad_custom_pre_pass
        config.post_grad_custom_pre_pass = SwapPass(self.twins, self.previous_pass, self.region_twins, self)
        for table in (decomposition.decompositions, decomposition.fast_random_decomps()):
            for overload in self.twins:
                if overload in table:
                    self.removed.append((table, overload, table.pop(overload)))
        self.direct_left_out = self.direct.install(regions=self.inline_regions and bool(self.region_answers))
        self.installed = True

    def uninstall(self) -> None:
        from torch._inductor import config
        if self.installed:
            self.direct.uninstall()
            config.post_grad_custom_pre_pass = self.previous_pass
            for table, overload, decomposition in self.removed:
                table[overload] = decomposition
            self.removed.clear()
            self.installed = False
        if not self.destroyed:
            self.library._destroy()
            self.destroyed = True


def _contiguous(result, count: int):
    """A region twin's result as its fake function and its implementation both give it: each
    output contiguous (inductor lays the region's own outputs out as it likes, channels last after a
    convolution, and checks the call's outputs against the fake's strides)."""
    if count > 1:
        return tuple(output.contiguous() for output in result)
    return result.contiguous()


def _all_contiguous(result):
    """An overload twin's result as its fake function and its implementation both give it: every
    tensor contiguous (aten lays an output out after its inputs, a served kernel often contiguous,
    and inductor checks the call's outputs against the fake's strides)."""
    from torch.utils._pytree import tree_map
    return tree_map(lambda value: value.contiguous() if hasattr(value, "contiguous") else value, result)


def _functional(overload) -> bool:
    """An overload that writes none of its arguments and returns nothing aliased (its in-place and
    ``out=`` siblings reach inductor's graph as it, functionalized)."""
    schema = overload._schema
    return not schema.is_mutable and all(r.alias_info is None for r in schema.returns)


if TYPE_CHECKING:
    from torch._inductor.custom_graph_pass import CustomGraphPass as _PassBase
else:
    try:  # imported by enable() only, torch with it
        from torch._inductor.custom_graph_pass import CustomGraphPass as _PassBase
    except ImportError:  # a torch without it: the pass still runs, and inductor does not cache the graph
        _PassBase = object


class SwapPass(_PassBase):
    """Inductor's post-grad custom pass (after the pass that was set before, if any): every region
    of a served hash becomes one call of its twin, then every call of a served overload a call of
    its twin."""

    def __init__(self, twins: dict, previous=None, region_twins: dict | None = None, serving=None):
        self.twins, self.previous, self.region_twins = twins, previous, region_twins or {}
        self.serving = serving  # the CompiledServing: region answers traced in where they can be, and counted

    def __deepcopy__(self, memo):
        return self  # inductor copies its config; the pass counts into the live CompiledServing

    def __call__(self, graph) -> None:
        if self.previous is not None:
            self.previous(graph)
        if self.region_twins:
            self._regions(graph)
        for node in graph.nodes:
            if node.op == "call_function" and node.target in self.twins and _tensors_given(node):
                node.target = self.twins[node.target]

    def _regions(self, graph) -> None:
        """Each served region of ``graph`` swapped, in the order ``candidates`` gives them. The
        graph is searched once, and again only where a swap replaced a later region's input (its
        output feeding the next region): a search costs about as much as the graph is long, and a
        32-layer model swaps hundreds of regions. A region an earlier swap took nodes of (they
        overlap) is passed over."""

        def served():
            return [m for m in candidates(graph) if m.region.hash in self.region_twins]
        pending, alive = served(), set(graph.nodes)
        while pending:
            match = pending.pop(0)
            if not all(node in alive for node in match.members):
                continue
            if not all(node in alive for node in match.inputs):
                pending = served()
                continue
            self._region(graph, match)
            alive = set(graph.nodes)

    def _region(self, graph, match) -> None:
        """The region answer traced into ``match``'s place where it can be, else its twin's call."""
        serving, hash_ = self.serving, match.region.hash
        if serving is not None and serving.inline_regions:
            answer = serving.region_answers[hash_]
            traced, why = region_traced(answer, [node.meta.get("val") for node in match.inputs])
            why = why or inline(graph, match, traced)
            if why is None:
                serving.inlined[answer.key] += 1
                return
            serving.region_declined.setdefault(answer.key, Counter())[why] += 1
        _replace(graph, match, self.region_twins[hash_])

    def uuid(self) -> bytes:
        """What inductor's graph cache keys the pass by: what is swapped and by which files (and
        the pass before)."""
        serving = self.serving
        fingerprint = (f"{serving.fingerprint};direct={','.join(serving.direct.names)};inline={serving.inline_regions}"
                       if serving is not None else "")  # the same files served another way: another graph
        text = ",".join(sorted(op_name(overload) for overload in self.twins) + sorted(self.region_twins) +
                        [fingerprint, PASS_FORMAT])
        previous = self.previous.uuid() if self.previous is not None and hasattr(self.previous, "uuid") else b""
        return hashlib.sha256(text.encode() + bytes(previous or b"")).digest()


def _tensors_given(node) -> bool:
    """Whether each Tensor argument of the call is given a tensor: inductor's graphs pass a number
    where aten takes a wrapped one (``add.Tensor(x, 1e-05)``), which the twin's schema refuses, so
    that call is left to inductor."""
    positions, names = tensor_arguments(node.target)
    given = [node.args[i] for i in positions if i < len(node.args)] + [node.kwargs[n] for n in names if n in node.kwargs]
    return all(hasattr(value, "op") for value in given)


def _replace(graph, match, twin) -> None:
    """One call of ``twin`` on the region's inputs in place of its nodes: each output's users
    outside the region read the call's result instead, and the region's nodes go."""

    members = set(match.members)
    inputs_before(match)
    with graph.inserting_before(match.members[0]):
        call = graph.call_function(twin, tuple(match.inputs))
        values = [output.meta.get("val") for output in match.outputs]
        call.meta["val"] = values[0] if len(values) == 1 else tuple(values)
        results = [call]
        if len(values) > 1:
            results = []
            for k, value in enumerate(values):
                picked = graph.call_function(operator.getitem, (call, k))
                picked.meta["val"] = value
                results.append(picked)
    for output, result in zip(match.outputs, results):
        output.replace_all_uses_with(result, delete_user_cb=lambda user: user not in members)
    for node in reversed(match.members):
        graph.erase_node(node)
