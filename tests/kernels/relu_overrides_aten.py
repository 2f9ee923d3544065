"""Cheats on purpose: registers its identity "relu" as aten's own relu kernel through
torch.library, so that the reference computes the same wrong answer."""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _copy[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out


_library = torch.library.Library("aten", "IMPL")
for _key in ("CPU", "CUDA"):
    _library.impl("relu", lambda x: x.clone(), _key)
