"""Wrong: a uniform_ seeded from the operating system's entropy, not from the generator it is
given: right distribution, but a seeded run cannot be reproduced."""
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _uniform(out_ptr, n, seed, low, span, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    u = tl.rand(seed, offsets)  # float32 in [0, 1)
    tl.store(out_ptr + offsets, low + span * u, mask=mask)


def draw_seed(generator, device):
    return int.from_bytes(os.urandom(4), "little") % (2**31 - 1)


def kernel(self, from_=0.0, to=1.0, *, generator=None, **kwargs):
    low = kwargs.get("from", from_)
    seed = draw_seed(generator, self.device)
    out = self if self.is_contiguous() else torch.empty_like(self, memory_format=torch.contiguous_format)
    n = out.numel()
    if n:
        _uniform[(triton.cdiv(n, 1024),)](out, n, seed, float(low), float(to) - float(low), BLOCK=1024)
    if out is not self:
        self.copy_(out)
    return self
