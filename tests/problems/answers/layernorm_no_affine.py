"""A wrong answer to level1/3_LayerNorm: it normalises but ignores the weight and the bias, which
start at 1 and 0."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def normalize_kernel(x_ptr, out_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / cols
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / cols
    tl.store(out_ptr + row * cols + offsets, centered / tl.sqrt(var + eps), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        cols = self.ln.weight.numel()
        x = x.contiguous()
        out = torch.empty_like(x)
        normalize_kernel[(x.numel() // cols,)](x, out, cols, self.ln.eps, BLOCK=triton.next_power_of_2(cols))
        return out
