"""Hand-written answer to KernelBench level 1 28_HardSigmoid: HardSigmoid."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _elementwise(x_ptr, out_ptr, n, param, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.minimum(tl.maximum(x / 6.0 + 0.5, 0.0), 1.0)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.param = float(0.0)

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _elementwise[(triton.cdiv(n, 4096),)](x, out, n, self.param, BLOCK=4096, num_warps=8)
        return out
