"""A right answer to level3/1_MLP_Block: layer norm in Triton, both products in torch, GELU fused
after the first product and the residual after the second, each in one Triton kernel."""
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


@triton.jit
def bias_gelu_kernel(x_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets % cols, mask=mask)
    tl.store(out_ptr + offsets, 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476)), mask=mask)


@triton.jit
def bias_residual_kernel(x_ptr, b_ptr, r_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets % cols, mask=mask)
    tl.store(out_ptr + offsets, x + tl.load(r_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        x = x.contiguous()
        dim = x.shape[-1]
        rows = x.numel() // dim
        normed = torch.empty_like(x)
        layer_norm_kernel[(rows,)](x, self.norm.weight, self.norm.bias, normed, dim, self.norm.eps,
                                   BLOCK=triton.next_power_of_2(dim))
        up = torch.mm(normed.view(rows, dim), self.up.weight.t()).contiguous()
        hidden = torch.empty_like(up)
        bias_gelu_kernel[(triton.cdiv(up.numel(), 256),)](up, self.up.bias, hidden, up.numel(), up.shape[1], BLOCK=256)
        down = torch.mm(hidden, self.down.weight.t()).contiguous()
        out = torch.empty_like(x)
        bias_residual_kernel[(triton.cdiv(down.numel(), 256),)](down, self.down.bias, x, out, down.numel(), dim,
                                                                BLOCK=256)
        return out
