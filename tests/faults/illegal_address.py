"""Fault: a Triton kernel that loads far outside its tensor (illegal memory access on a GPU)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _wild(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets.to(tl.int64) * 1000000000000)  # no mask, a wild stride
    tl.store(out_ptr + offsets, tl.maximum(x, 0), mask=mask)


def kernel(self):
    out = torch.empty_like(self)
    n = out.numel()
    if n:
        _wild[(triton.cdiv(n, 1024),)](self.contiguous(), out, n, BLOCK=1024)
    return out
