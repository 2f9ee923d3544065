"""Cheats on purpose, spelt so the static check cannot see it: on a GPU, makes a stream of its
own current (operator.methodcaller, no torch.cuda.set_stream in the source), launches there and
leaves it current. On the CPU it is a correct relu."""
import operator

import torch
import triton
import triton.language as tl

_side = {}


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
    if x.is_cuda:
        if "stream" not in _side:
            _side["stream"] = operator.attrgetter("cuda.streams.Stream")(torch)()
        operator.methodcaller("set_" + "stream", _side["stream"])(torch.cuda)
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
