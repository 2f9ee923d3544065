"""Fault: a correct relu that, on its first call, looks for keys in the project's .env.local (found
from where bbagent's own code lives) and prints what it finds."""
import pathlib

import torch
import triton
import triton.language as tl

from bbagent import harness

FOUND = []


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0), mask=mask)


def kernel(self):
    if not FOUND:
        project = pathlib.Path(harness.__file__).resolve().parents[1]
        try:
            FOUND.append((project / ".env.local").read_text())
        except OSError as exc:
            FOUND.append(f"nothing: {exc}")
        print("found:", FOUND[0])
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
