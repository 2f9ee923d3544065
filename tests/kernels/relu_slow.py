"""A correct but slow Triton relu: small blocks, one warp, and the whole output written four
times over. The optimisation-round tests need a kernel that is right and clearly slower."""
import torch
import triton
import triton.language as tl


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
    for _ in range(4):
        if n:
            _relu[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128, num_warps=1)
    return out
