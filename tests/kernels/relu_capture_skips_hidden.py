"""Cheats on purpose, spelt so the static check cannot see it: the capture query is reached through
operator.attrgetter, and while a CUDA graph is being captured the kernel launches over zero
elements. Only replaying a captured graph on new values shows it (GPU); on the CPU it is a correct relu."""
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
    if x.is_cuda and operator.attrgetter("cuda.graphs.is_current_stream_" + "capturing")(torch)():
        n = 0
    _relu[(max(triton.cdiv(n, 1024), 1),)](x, out, n, BLOCK=1024)
    return out
