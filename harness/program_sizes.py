"""A program at smaller sizes: its top-level size constants changed in its text.

KernelBench problems fix their sizes in top-level constants (``batch_size = 16``, ``dim = 16384``)
that ``get_inputs`` and ``get_init_inputs`` read. An answer can be right at those sizes only (no
masks where the sizes are multiples of its blocks, a size written into the kernel), so its
program's tests add one draw at other sizes where the program allows them. ``size_constants``
finds the constants (a name, or names chained as in ``height = width = 12``, given an integer
literal of at least ``MIN_SIZE``: smaller ones are kernel sizes, strides and counts that change
what is computed); An integer written as arithmetic on literals (``N = 2048 * 2``) is one too, and so is each such
element of a tuple or list (``input_shape = (32768,)``). ``shrinkings`` proposes new values, in the order they are tried (odd values
about a third of each, then each even value halved, which keeps one size dividing another, then
the first constant alone made odd); ``shrunk_text`` writes them into the text. Whether the
program allows a shrinking is found by running it (``harness.sandbox.child.program_job``).
"""
from __future__ import annotations

import ast
import operator
from dataclasses import dataclass

MIN_SIZE = 8


@dataclass(frozen=True)
class SizeConstant:
    """``names = value`` at the top level of a program (or one element of a tuple so assigned,
    ``label`` then naming it and ``names`` empty): the literal's place in its text."""
    names: tuple[str, ...]
    label: str
    value: int
    line: int  # 1-based
    start: int  # the literal's columns on its line (UTF-8 offsets, as ast gives them)
    end: int


@dataclass(frozen=True)
class Shrinking:
    """New values for some of a program's size constants, and how they were chosen."""
    how: str
    values: dict[SizeConstant, int]

    def described(self) -> str:
        """``batch_size 16→5, dim 512→171``."""
        return ", ".join(f"{c.label} {c.value}→{v}" for c, v in self.values.items())

    def renamed(self) -> dict[str, tuple[int, int]]:
        """Each constant's name: (its value in the problem, its value here)."""
        return {name: (c.value, v) for c, v in self.values.items() for name in c.names}


def size_constants(text: str) -> list[SizeConstant]:
    """The program's top-level integer constants of at least ``MIN_SIZE``, in the text's order."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not all(isinstance(t, ast.Name) for t in node.targets):
            continue
        names = tuple(t.id for t in node.targets if isinstance(t, ast.Name))
        label = " = ".join(names)
        if isinstance(node.value, (ast.Tuple, ast.List)):
            found += [_constant(element, (), f"{label}[{i}]") for i, element in enumerate(node.value.elts)]
        else:
            found.append(_constant(node.value, names, label))
    return [c for c in found if c is not None]


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
              ast.LShift: operator.lshift}


def _constant(node, names: tuple[str, ...], label: str) -> SizeConstant | None:
    value = _integer(node)
    if value is None or value < MIN_SIZE or node.lineno != node.end_lineno:
        return None
    return SizeConstant(names=names, label=label, value=value, line=node.lineno, start=node.col_offset,
                        end=node.end_col_offset)


def _integer(node) -> int | None:
    """The value of an integer literal, or of arithmetic on such literals (``2048 * 2``); else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _integer(node.left), _integer(node.right)
        if left is None or right is None or (isinstance(node.op, ast.LShift) and not 0 <= right < 64) \
                or (isinstance(node.op, ast.FloorDiv) and right == 0):
            return None
        return _OPERATORS[type(node.op)](left, right)
    return None


def _odd_third(value: int) -> int:
    return max(5, value // 3) | 1


def shrinkings(constants: list[SizeConstant]) -> list[Shrinking]:
    """The new values to try, in order (see the module's docstring); none without constants."""
    if not constants:
        return []
    tried = [Shrinking("odd sizes about a third of the problem's", {c: _odd_third(c.value) for c in constants})]
    halved = {c: c.value // 2 for c in constants if c.value % 2 == 0}
    if halved:
        tried.append(Shrinking("even sizes halved", halved))
    if len(constants) > 1:
        tried.append(Shrinking("the first size odd", {constants[0]: _odd_third(constants[0].value)}))
    return tried


def shrunk_text(text: str, shrinking: Shrinking) -> str:
    """``text`` with each constant's literal replaced by its new value."""
    lines = text.splitlines(keepends=True)
    for constant, value in sorted(shrinking.values.items(), key=lambda cv: (cv[0].line, cv[0].start), reverse=True):
        raw = lines[constant.line - 1].encode()
        lines[constant.line - 1] = (raw[:constant.start] + str(value).encode() + raw[constant.end:]).decode()
    return "".join(lines)
