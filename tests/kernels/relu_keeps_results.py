"""Wrong on purpose: a relu that, once it has been called five times in a row on the same input
tensor, returns its earlier result instead of computing (a cache keyed by the input's address).
Every test passes (each test's first call computes); only a check after timing, with new
values in the same tensors, can see it. ``torch.cuda.synchronize`` keeps it out of CUDA graphs,
so it is timed as eager calls, where the cache would pay off."""
import torch
import triton
import triton.language as tl

_last = {"key": None, "calls": 0, "out": None}


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)


def kernel(self):
    if self.is_cuda:
        torch.cuda.synchronize()
    key = (self.data_ptr(), tuple(self.shape), self.stride(), self.dtype)
    _last["calls"] = _last["calls"] + 1 if _last["key"] == key else 1
    _last["key"] = key
    if _last["calls"] > 5:
        return _last["out"]
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    _last["out"] = out
    return out
