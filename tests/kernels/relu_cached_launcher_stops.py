"""A wrong relu with a broken launch cache: after the first call of a specialisation it believes the
compiled kernel is ready and returns its output buffer without launching anything, on any stack."""
import torch
import triton
import triton.language as tl

BLOCK = 1024
_ready = set()


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    key = (x.dtype, n % 16 == 0)
    if n and key not in _ready:
        _relu.run(x, out, n, BLOCK, grid=(triton.cdiv(n, BLOCK),), warmup=False)
        _ready.add(key)
    return out
