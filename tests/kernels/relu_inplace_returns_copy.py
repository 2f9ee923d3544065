"""Wrong on purpose for aten.relu_.default: writes self correctly but returns a new tensor."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu2(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.where(x < 0, tl.zeros_like(x), x)
    tl.store(x_ptr + offsets, y, mask=mask)
    tl.store(y_ptr + offsets, y, mask=mask)


def kernel(self):
    work = self if self.is_contiguous() else self.contiguous()
    out = torch.empty_like(work)
    if work.numel():
        _relu2[(triton.cdiv(work.numel(), 1024),)](work, out, work.numel(), BLOCK=1024)
    if work is not self:
        self.copy_(work)
    return out
