"""Fault: a Triton kernel whose loop never ends (timeout while the GPU runs it)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _spin(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    i = 1
    while i > 0:  # i only grows: the loop never ends
        x = x * 1.0
        i += 1
    tl.store(out_ptr + offsets, x.to(out_ptr.dtype.element_ty), mask=mask)


def kernel(self):
    out = torch.empty_like(self)
    n = out.numel()
    if n:
        _spin[(triton.cdiv(n, 1024),)](self.contiguous(), out, n, BLOCK=1024)
    return out
