"""Wrong on purpose: a relu that, from its 300th call in the process on, writes only the first half
of its result. Every test passes (the tests make fewer calls); only many calls in a row show it."""
import torch
import triton
import triton.language as tl

_calls = [0]


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)  # keeps NaN


def kernel(self):
    _calls[0] += 1
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if _calls[0] >= 300:
        n = n // 2
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
