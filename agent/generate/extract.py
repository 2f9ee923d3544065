"""Pull the kernel module out of an LLM answer.

Fenced blocks are read the way Markdown reads them: a fence opens at the start of a line
(after any indentation, as in a list item) with three or more backticks or tildes, and
closes on a line of the same character, at least as long; the opening line's indentation is
removed from the block. Fences mentioned inside prose do not open a block.

The kernel is the last Python block that defines ``kernel`` (else the longest Python block);
when it calls functions that only other blocks define (a ``@triton.jit`` kernel in its own
block, say), those blocks are joined in front of it. An answer without fences counts when it
is itself a module that defines ``kernel``. An unterminated final fence (an answer cut off by
the token limit) still counts, so that the evaluation reports the real syntax error rather
than "no code".
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from bbagent.harness.interface import parse

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$")
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}
_DEFINES_KERNEL = re.compile(r"^def kernel\s*\(", re.MULTILINE)


@dataclass
class Block:
    language: str
    body: str


def fenced_blocks(answer: str) -> list[Block]:
    """Every fenced block of the answer, in order, with its opening indentation removed."""
    lines = answer.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = _OPEN.match(lines[i])
        if not opening or (opening["fence"][0] == "`" and "`" in opening["info"]):
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"].expandtabs(4))
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body, i = [], i + 1
        while i < len(lines) and not closing.match(lines[i]):
            body.append(_dedent(lines[i], indent))
            i += 1
        i += 1  # past the closing fence (or the end of a cut-off answer)
        language = opening["info"].strip().split(" ")[0].lower() if opening["info"].strip() else ""
        blocks.append(Block(language.lstrip("{.").rstrip("}"), "\n".join(body)))
    return blocks


def _dedent(line: str, indent: int) -> str:
    """The line without up to ``indent`` columns of leading whitespace."""
    expanded = line.expandtabs(4)
    removable = len(expanded) - len(expanded.lstrip(" "))
    return expanded[min(indent, removable):]


def extract_code(answer: str) -> str | None:
    """The kernel module in ``answer``, or None when it holds no Python code."""
    blocks = [b.body for b in fenced_blocks(answer) if b.language in _PYTHON_TAGS and b.body.strip()]
    if not blocks:
        return _unfenced_module(answer)
    with_kernel = [b for b in blocks if _DEFINES_KERNEL.search(b)]
    chosen = with_kernel[-1] if with_kernel else max(blocks, key=len)
    return _with_missing_definitions(chosen, blocks).strip() + "\n"


def _unfenced_module(answer: str) -> str | None:
    """The answer itself, or its part from the first import on, if that is a module defining ``kernel``."""
    text = answer.strip()
    starts = [m.start() for m in re.finditer(r"^(?:import|from)\s+\w", text, re.MULTILINE)]
    for candidate in [text] + ([text[starts[0]:]] if starts else []):
        if _DEFINES_KERNEL.search(candidate) and _parses(candidate):
            return candidate + "\n"
    return None


def _parses(source: str) -> bool:
    try:
        parse(source)
    except SyntaxError:
        return False
    return True


def _with_missing_definitions(chosen: str, blocks: list[str]) -> str:
    """``chosen`` joined, in the answer's order, with the other blocks that define names it (or
    a block joined for it) uses but does not define."""
    parsed = {}
    for index, block in enumerate(blocks):
        try:
            parsed[index] = parse(block)
        except SyntaxError:
            continue
    start = next(i for i, b in enumerate(blocks) if b is chosen)
    if start not in parsed:
        return chosen  # the evaluation reports the syntax error as it stands
    taken, defined = {start}, _defined_names(parsed[start])
    missing = _used_names(parsed[start]) - defined
    while missing:
        helper = next((i for i in parsed if i not in taken and _defined_names(parsed[i]) & missing), None)
        if helper is None:
            break
        taken.add(helper)
        defined |= _defined_names(parsed[helper])
        missing = (missing | _used_names(parsed[helper])) - defined
    return "\n\n".join(blocks[i] for i in sorted(taken))


def _defined_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _used_names(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
