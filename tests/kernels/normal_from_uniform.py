"""Wrong: normal_ drawn as uniform values scaled to the right mean and standard deviation.
Mean and std match the reference; the shape of the distribution does not."""
import torch
import triton
import triton.language as tl


@triton.jit
def _normal(out_ptr, n, seed, mean, std, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    u = tl.rand(seed, offsets) - 0.5  # uniform in [-0.5, 0.5): std 1/sqrt(12)
    tl.store(out_ptr + offsets, mean + std * 3.4641016151377544 * u, mask=mask)


def kernel(self, mean=0.0, std=1.0, *, generator=None):
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator, device=self.device))
    out = self if self.is_contiguous() else torch.empty_like(self, memory_format=torch.contiguous_format)
    n = out.numel()
    if n:
        _normal[(triton.cdiv(n, 1024),)](out, n, seed, float(mean), float(std), BLOCK=1024)
    if out is not self:
        self.copy_(out)
    return self
