"""A right answer to level1/3_LayerNorm: one program per normalised row, weight and bias applied."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / cols
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / cols
    w = tl.load(w_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + row * cols + offsets, centered / tl.sqrt(var + eps) * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        cols = self.ln.weight.numel()
        x = x.contiguous()
        out = torch.empty_like(x)
        layer_norm_kernel[(x.numel() // cols,)](x, self.ln.weight, self.ln.bias, out, cols, self.ln.eps,
                                                BLOCK=triton.next_power_of_2(cols))
        return out
