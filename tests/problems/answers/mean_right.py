"""A right answer to level1/5_Mean_over_dim (dim 1 of a 2-d input): one program per row."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, out_ptr, cols, stride_row, stride_col, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_row + offsets * stride_col, mask=offsets < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0) / cols)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        row_mean_kernel[(rows,)](x, out, cols, x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(cols))
        return out
