"""A relu that computes integers through float32 (as a model writes it to "keep one code path"):
right on every small integer, wrong on integers float32 cannot hold (past 2**24). Floating inputs are
computed as they are."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, THROUGH_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    if THROUGH_FLOAT:
        x = x.to(tl.float32)
    y = tl.where(x < 0, tl.zeros_like(x), x)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, THROUGH_FLOAT=not x.dtype.is_floating_point, BLOCK=1024)
    return out
