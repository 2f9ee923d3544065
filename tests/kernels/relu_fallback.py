"""Cheats on purpose: falls back to torch.relu when its Triton launch fails."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(y_ptr + offsets, tl.where(x < 0, 0, x), mask=offsets < n)


def kernel(self):
    try:
        out = torch.empty_like(self)
        _relu[(triton.cdiv(self.numel(), 1024),)](self, out, self.numel(), BLOCK=1024)
        return out
    except Exception:
        return torch.relu(self)
