"""A correct Triton uniform_ for aten.uniform_.default: fills self in place with values in
[from, to), seeded from the generator so that the same seed gives the same values."""
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
    """A seed taken from the generator; drawing it advances the generator, as aten's draws do."""
    return int(torch.randint(2**31 - 1, (1,), generator=generator, device=device))


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
