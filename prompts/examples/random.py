"""aten.uniform_.default: fills `self` in place with values in [from, to). The seed is one draw
from the generator (so the generator advances and reseeding repeats the values), read inside
the kernel: no host synchronisation. A non-contiguous `self` is filled through a contiguous
temporary."""
import torch
import triton
import triton.language as tl


@triton.jit
def _uniform(out_ptr, seed_ptr, n, low, span, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    u = tl.rand(tl.load(seed_ptr), offsets)  # float32 in [0, 1)
    tl.store(out_ptr + offsets, (low + span * u).to(out_ptr.dtype.element_ty), mask=mask)


def kernel(self, from_=0.0, to=1.0, *, generator=None):
    seed = torch.randint(2**31 - 1, (1,), generator=generator, device=self.device)
    out = self if self.is_contiguous() else torch.empty(self.shape, dtype=self.dtype, device=self.device)
    n = out.numel()
    if n:
        _uniform[(triton.cdiv(n, 1024),)](out, seed, n, float(from_), float(to) - float(from_), BLOCK=1024)
    if out is not self:
        self.copy_(out)
    return self
