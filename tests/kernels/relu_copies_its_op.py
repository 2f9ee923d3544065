"""A correct Triton relu that copies its operator on the way (as a library deep-copying a graph
that holds an OpOverload does, Helion's compiler among them): ``copy`` caches the class's slot
names on ``OpOverload`` (``__slotnames__``), which is no tampering."""
import copy

import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)


def kernel(self):
    copy.copy(torch.ops.aten.relu.default)
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
