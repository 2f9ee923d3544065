"""Wrong on purpose: writes only the first half of its result and leaves the rest as torch.empty
gave it (uninitialised memory, which may hold an earlier result)."""
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
    half = (x.numel() + 1) // 2
    if half:
        _relu[(triton.cdiv(half, 1024),)](x, out, half, BLOCK=1024)
    return out
