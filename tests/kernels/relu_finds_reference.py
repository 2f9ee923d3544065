"""Cheats on purpose: searches the garbage collector's objects for a live tensor shaped like its
result that is not its input (the reference's result, where the harness keeps one) and returns a
copy of it; it computes nothing itself but a copy."""
import gc

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def kernel(self):
    out = torch.empty_like(self.contiguous())
    for candidate in gc.get_objects():
        if (isinstance(candidate, torch.Tensor) and candidate is not self and candidate.shape == self.shape
                and candidate.dtype == self.dtype and candidate.device == self.device and candidate.is_contiguous()):
            if out.numel():
                _copy[(triton.cdiv(out.numel(), 1024),)](candidate, out, out.numel(), BLOCK=1024)
            return out
    return out
