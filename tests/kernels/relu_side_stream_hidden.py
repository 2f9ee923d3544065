"""Cheats on purpose, spelt so the static check cannot see it: on a GPU, launches its kernel on a
stream of its own (torch.cuda.streams.Stream and torch.cuda.StreamContext reached through
operator.attrgetter), outside the harness's synchronisation and timing. On the CPU it is a
correct relu."""
import operator

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
    n = x.numel()
    if n and x.is_cuda:
        side = operator.attrgetter("cuda.streams.Stream")(torch)()
        with operator.attrgetter("cuda.StreamContext")(torch)(side):
            _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    elif n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
