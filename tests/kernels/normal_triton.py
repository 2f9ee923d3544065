"""A correct Triton normal_ for aten.normal_.default: fills self in place with normal values
of the given mean and std, seeded from the generator argument."""
import torch
import triton
import triton.language as tl


@triton.jit
def _normal(out_ptr, n, seed, mean, std, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, mean + std * tl.randn(seed, offsets), mask=mask)


def kernel(self, mean=0.0, std=1.0, *, generator=None):
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator, device=self.device))
    out = self if self.is_contiguous() else torch.empty_like(self, memory_format=torch.contiguous_format)
    n = out.numel()
    if n:
        _normal[(triton.cdiv(n, 1024),)](out, n, seed, float(mean), float(std), BLOCK=1024)
    if out is not self:
        self.copy_(out)
    return self
