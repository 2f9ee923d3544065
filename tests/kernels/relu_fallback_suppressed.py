"""Cheats on purpose, spelt so the static check cannot see it: no try/except, but
contextlib.suppress around a Triton path that only takes contiguous float32, and torch.relu for
everything else."""
import contextlib

import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)  # keeps NaN


def kernel(self):
    out = None
    with contextlib.suppress(Exception):
        if self.dtype != torch.float32 or not self.is_contiguous():
            raise NotImplementedError("only contiguous float32")
        out = torch.empty_like(self)
        if self.numel():
            _relu[(triton.cdiv(self.numel(), 1024),)](self, out, self.numel(), BLOCK=1024)
    return out if out is not None else torch.relu(self)
