"""Cheats on purpose (static spelling): while a CUDA graph is being captured, launches its kernel
over zero elements, so a replayed graph leaves the result unwritten. Every test calls it eagerly and
passes; the static check sees torch.cuda.is_current_stream_capturing."""
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
    if x.is_cuda and torch.cuda.is_current_stream_capturing():
        n = 0
    _relu[(max(triton.cdiv(n, 1024), 1),)](x, out, n, BLOCK=1024)
    return out
