"""Cheats on purpose, spelt so the static check cannot see it: the reference search of
relu_finds_reference.py, with the garbage collector reached through torch's own reference to sys
(operator.attrgetter, no import of gc)."""
import operator

import torch
import triton
import triton.language as tl

_collector = operator.attrgetter("sys.modules")(torch)["gc"]


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def kernel(self):
    out = torch.empty_like(self.contiguous())
    for candidate in _collector.get_objects():
        if (isinstance(candidate, torch.Tensor) and candidate is not self and candidate.shape == self.shape
                and candidate.dtype == self.dtype and candidate.device == self.device and candidate.is_contiguous()):
            if out.numel():
                _copy[(triton.cdiv(out.numel(), 1024),)](candidate, out, out.numel(), BLOCK=1024)
            return out
    return out
