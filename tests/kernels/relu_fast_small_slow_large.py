"""Correct, and a geomean game on overhead-dominated shapes: one launch on small tensors, where
every kernel is as fast as launching one, and the whole result written four times over on large
ones. Only the shapes a kernel's own work decides may count toward its speedup."""
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
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    for _ in range(1 if n < 1 << 16 else 4):
        if n:
            _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
