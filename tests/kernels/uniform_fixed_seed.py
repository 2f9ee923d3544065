"""Wrong: a uniform_ with a fixed seed. Its values are uniform, and reproducible, but every
call draws the same ones (a dropout mask that never changes)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _uniform(out_ptr, n, seed, low, span, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    u = tl.rand(seed, offsets)  # float32 in [0, 1)
    tl.store(out_ptr + offsets, low + span * u, mask=mask)


def kernel(self, from_=0.0, to=1.0, *, generator=None, **kwargs):
    low = kwargs.get("from", from_)
    seed = 1234
    out = self if self.is_contiguous() else torch.empty_like(self, memory_format=torch.contiguous_format)
    n = out.numel()
    if n:
        _uniform[(triton.cdiv(n, 1024),)](out, n, seed, float(low), float(to) - float(low), BLOCK=1024)
    if out is not self:
        self.copy_(out)
    return self
