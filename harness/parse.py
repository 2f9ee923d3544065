"""Python's parser for threads: CPython 3.11's ``ast.parse`` is not safe to call from two threads at
once (it can raise ``SystemError: AST constructor recursion depth mismatch``), and a batch parses
answers, kernels and traces in many threads of one process. Every parse goes through this lock."""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source)


def parse_expression(source: str) -> ast.expr:
    """The expression ``source`` is (``ast.parse(source, mode="eval").body``), one thread at a time."""
    with _LOCK:
        return ast.parse(source, mode="eval").body
