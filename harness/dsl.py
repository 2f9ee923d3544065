"""The kernel languages an answer may be asked in: Triton, and Helion, PyTorch's tiled kernel
language that compiles to Triton.

Both are judged by the one verdict: a Helion kernel runs as the Triton launches Helion generates,
so launch provenance, the in-use checks, the sandbox and every guard apply unchanged. What differs
is what the answer must be written in, which the static check reads (``unwritten``), and where the
prompt's language-specific parts come from (``agent.generate.prompting``). Standard library only:
the child and the parent both read it.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Dsl:
    """A kernel language. ``marker``: the decorator (its dotted name, imports resolved) that every
    kernel written in it carries, read from the source; None where the run-time rule alone holds
    (a Triton launch in every test, which Helion's kernels meet as well). ``package``: the module
    its answers import."""
    name: str
    title: str
    package: str
    marker: str | None = None

    def unwritten(self, tree: ast.Module, resolve: Callable[[ast.AST], str | None]) -> str | None:
        """Why the module ``tree`` is not written in this language (``resolve``: a node's dotted
        name with the module's imports resolved), or None where it is."""
        if self.marker is None:
            return None
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    if resolve(decorator.func if isinstance(decorator, ast.Call) else decorator) == self.marker:
                        return None
        return (f"defines no function decorated with @{self.marker}: the answer was asked in {self.title}, so its "
                f"computation runs in {self.title} kernels (`@{self.marker}` functions called from `kernel`)")


TRITON = Dsl("triton", "Triton", "triton")
HELION = Dsl("helion", "Helion", "helion", marker="helion.kernel")
DSLS = {dsl.name: dsl for dsl in (TRITON, HELION)}


def dsl_named(name: str) -> Dsl:
    """The language called ``name``; a ValueError naming the known ones."""
    if name not in DSLS:
        raise ValueError(f"unknown kernel language {name!r}; choose one of {', '.join(DSLS)}")
    return DSLS[name]
