"""A correct Triton bernoulli_ for aten.bernoulli_.float (the dropout mask of real models):
self becomes 1 with probability p and 0 otherwise, seeded from the generator."""
import torch
import triton
import triton.language as tl


@triton.jit
def _bernoulli(out_ptr, n, seed, p, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    u = tl.rand(seed, offsets)
    tl.store(out_ptr + offsets, tl.where(u < p, 1.0, 0.0), mask=mask)


def kernel(self, p=0.5, *, generator=None):
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator, device=self.device))
    out = self if self.is_contiguous() else torch.empty_like(self, memory_format=torch.contiguous_format)
    n = out.numel()
    if n:
        _bernoulli[(triton.cdiv(n, 1024),)](out, n, seed, float(p), BLOCK=1024)
    if out is not self:
        self.copy_(out)
    return self
