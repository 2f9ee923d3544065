"""Python's parser for threads: CPython 3.11's ``ast.parse`` is not safe to call from two threads at
once (it can raise ``SystemError: AST constructor recursion depth mismatch``), and a batch parses
answers, kernels and traces in many threads of one process. Every parse goes through this lock."""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(source, mode=mode)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, mode=mode)
