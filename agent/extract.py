"""Pull the kernel module out of an LLM answer."""
from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(answer: str) -> str | None:
    """The fenced Python block that defines ``kernel``; else the longest Python block; else None.

    An unterminated final fence (an answer cut off by the token limit) still counts,
    so that the evaluation reports the real syntax error rather than "no code".
    """
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(answer)]
    python = [body for lang, body in blocks if lang in ("python", "py", "python3", "")]
    if not python:
        return None
    with_kernel = [b for b in python if re.search(r"^def kernel\s*\(", b, re.MULTILINE)]
    chosen = with_kernel[-1] if with_kernel else max(python, key=len)
    return chosen.strip() + "\n" if chosen.strip() else None
