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
from importlib import metadata


@dataclass(frozen=True)
class Dsl:
    """A kernel language. ``marker``: the decorator (its dotted name, imports resolved) that every
    kernel written in it carries, read from the source; None where the run-time rule alone holds
    (a Triton launch in every test, which Helion's kernels meet as well). ``package``: the module
    its answers import; ``broken``: its releases known to compile right kernels wrongly, with what
    they do (a right answer would fail its tests under them); ``extra``: bbagent's extra installing it."""
    name: str
    title: str
    package: str
    marker: str | None = None
    broken: tuple[tuple[str, str], ...] = ()
    extra: str | None = None

    def unusable(self) -> str | None:
        """Why answers in this language cannot be judged here (its package missing, or a release
        known to miscompile), in words that say the fix; None where they can."""
        try:
            version = metadata.version(self.package)
        except metadata.PackageNotFoundError:
            install = f"pip install 'bbagent[{self.extra}]'" if self.extra else f"pip install {self.package}"
            return f"--dsl {self.name} needs the {self.package} package, which is not installed here: {install}"
        for release, what in self.broken:
            if version == release:
                return (f"{self.title} {version} is installed, and it {what}, so right answers would fail their "
                        f"tests: install another release of {self.package}")
        return None

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
HELION = Dsl("helion", "Helion", "helion", marker="helion.kernel", extra="helion", broken=(
    ("1.5.0", "compiles a store into a tensor dimension of size 1 without its mask (every row of a tile writes "
              "row 0: an mm with one row came back zeros on an H200; 1.4.0 and 1.5.1 store right)"),))
DSLS = {dsl.name: dsl for dsl in (TRITON, HELION)}


def dsl_named(name: str) -> Dsl:
    """The language called ``name``; a ValueError naming the known ones."""
    if name not in DSLS:
        raise ValueError(f"unknown kernel language {name!r}; choose one of {', '.join(DSLS)}")
    return DSLS[name]
