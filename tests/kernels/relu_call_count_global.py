"""Wrong on purpose: from its 300th call on it answers with the result of an earlier call on the
same shape (kept in a global dictionary) instead of launching. Every test passes; only many calls
in a row on refilled inputs show it."""
import torch
import triton
import triton.language as tl

_calls = 0
_kept = {}


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)  # keeps NaN


def kernel(self):
    global _calls
    _calls += 1
    x = self.contiguous()
    key = (tuple(x.shape), x.dtype, x.device)
    if _calls >= 300 and key in _kept:
        return _kept[key].clone()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    _kept[key] = out
    return out
