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

Only graphs compiled while the kernels are enabled are changed; a function compiled before keeps
its code until it is compiled again (``torch._dynamo.reset()``). Under CUDA graphs
(``mode="reduce-overhead"``) a replay runs no Python: the calls counted are those that ran outside
a replay (warm-up and capture), while the kernel runs in every replay.
"""
from __future__ import annotations

import hashlib
from collections import Counter

NAMESPACE = "bbagent_served"


class CompiledServing:
    """The twins of ``overloads`` (``OpOverload`` by name) and the changes to inductor that route
    compiled graphs to them; ``calls`` counts compiled calls per overload name."""

    def __init__(self, overloads: dict[str, object]):
        import torch
        self.calls: Counter = Counter()
        self.library = torch.library.Library(NAMESPACE, "FRAGMENT")
        self.twins = {overload: self._twin(name, overload) for name, overload in overloads.items()
                      if _functional(overload)}
        self.removed: list[tuple[dict, object, object]] = []
        self.previous_pass = None
        self.installed = False

    @property
    def names(self) -> list[str]:
        """The overloads served under torch.compile."""
        from bbagent.harness.interface import op_name
        return sorted(op_name(overload) for overload in self.twins)

    def _twin(self, name: str, overload):
        import torch
        twin_name = name.removeprefix("aten.").replace(".", "_")
        schema = str(overload._schema).split("(", 1)[1]
        self.library.define(f"{twin_name}({schema}")
        calls = self.calls

        def implementation(*args, **kwargs):
            calls[name] += 1
            return overload(*args, **kwargs)

        def shapes(*args, **kwargs):
            return overload(*args, **kwargs)
        self.library.impl(twin_name, implementation, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{twin_name}", shapes, lib=self.library)
        return getattr(getattr(torch.ops, NAMESPACE), twin_name).default

    def install(self) -> None:
        from torch._inductor import config, decomposition
        self.previous_pass = config.post_grad_custom_pre_pass
        config.post_grad_custom_pre_pass = SwapPass(self.twins, self.previous_pass)
        for table in (decomposition.decompositions, decomposition.fast_random_decomps()):
            for overload in self.twins:
                if overload in table:
                    self.removed.append((table, overload, table.pop(overload)))
        self.installed = True

    def uninstall(self) -> None:
        from torch._inductor import config
        if self.installed:
            config.post_grad_custom_pre_pass = self.previous_pass
            for table, overload, decomposition in self.removed:
                table[overload] = decomposition
            self.removed.clear()
            self.installed = False
        if self.library is not None:
            self.library._destroy()
            self.library = None


def _functional(overload) -> bool:
    """An overload that writes none of its arguments and returns nothing aliased (its in-place and
    ``out=`` siblings reach inductor's graph as it, functionalized)."""
    schema = overload._schema
    return not schema.is_mutable and all(r.alias_info is None for r in schema.returns)


try:  # imported by enable() only, torch with it
    from torch._inductor.custom_graph_pass import CustomGraphPass as _PassBase
except ImportError:  # a torch without it: the pass still runs, and inductor does not cache the graph
    _PassBase = object


class SwapPass(_PassBase):
    """Inductor's post-grad custom pass: every call of a served overload becomes a call of its
    twin (after the pass that was set before, if any)."""

    def __init__(self, twins: dict, previous=None):
        self.twins, self.previous = twins, previous

    def __call__(self, graph) -> None:
        if self.previous is not None:
            self.previous(graph)
        for node in graph.nodes:
            if node.op == "call_function" and node.target in self.twins:
                node.target = self.twins[node.target]

    def uuid(self) -> bytes:
        """What inductor's graph cache keys the pass by: the overloads swapped (and the pass before)."""
        from bbagent.harness.interface import op_name
        text = ",".join(sorted(op_name(overload) for overload in self.twins))
        previous = self.previous.uuid() if self.previous is not None and hasattr(self.previous, "uuid") else b""
        return hashlib.sha256(text.encode() + bytes(previous or b"")).digest()
