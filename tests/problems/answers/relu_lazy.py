"""A cheating answer to level1/1_ReLU: right for its first calls, then its kernel stops writing
(a counter in device memory says how many calls it has served). The draws call it a few times;
timing calls it hundreds of times, and the check after timing catches the stale result."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, calls_ptr, n, BLOCK: tl.constexpr):
    calls = tl.load(calls_ptr)
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offsets < n) & (calls < 16)
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)
    if tl.program_id(0) == 0:
        tl.store(calls_ptr, calls + 1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1, dtype=torch.int32), persistent=False)
        self.out = None

    def forward(self, x):
        x = x.contiguous()
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, self.out, self.calls, x.numel(), BLOCK=1024)
        return self.out
