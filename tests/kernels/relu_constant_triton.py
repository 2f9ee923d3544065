"""Wrong on purpose: a Triton kernel that writes zeros, whatever the input (a launch happens, the
values are constant)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _zeros(y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, tl.zeros([BLOCK], dtype=y_ptr.dtype.element_ty), mask=offsets < n)


def kernel(self):
    out = torch.empty_like(self.contiguous())
    if out.numel():
        _zeros[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), BLOCK=1024)
    return out
