"""Fault: a Triton kernel whose compilation does not finish (a static loop unrolled 10**8 times)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _unrolled(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    for _ in tl.static_range(100000000):
        x = tl.maximum(x, 0.0)
    tl.store(out_ptr + offsets, x.to(out_ptr.dtype.element_ty), mask=mask)


def kernel(self):
    out = torch.empty_like(self)
    n = out.numel()
    if n:
        _unrolled[(triton.cdiv(n, 1024),)](self.contiguous(), out, n, BLOCK=1024)
    return out
