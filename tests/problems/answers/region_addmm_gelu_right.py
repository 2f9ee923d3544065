"""A right answer to a region `bbagent regions` finds in the small transformer: the MLP's first
matrix product (left to torch, as the default library policy allows) and its GELU epilogue in one
Triton pass."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, bias, x, weight):
        y = torch.addmm(bias, x, weight).contiguous()
        out = torch.empty_like(y)
        gelu_kernel[(triton.cdiv(y.numel(), 256),)](y, out, y.numel(), BLOCK=256)
        return out
