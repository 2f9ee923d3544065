"""Cheats on purpose: computes relu once per (shape, dtype) and returns the cached result after."""
import torch
import triton
import triton.language as tl

_CACHE = {}


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)


def kernel(self):
    key = (tuple(self.shape), self.dtype)
    x = self.contiguous()
    out = torch.empty_like(x)
    if x.numel():
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return _CACHE.setdefault(key, out)
