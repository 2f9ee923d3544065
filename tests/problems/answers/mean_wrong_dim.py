"""A wrong answer to level1/5_Mean_over_dim: the mean over dimension 0, whatever dim says (the
same shape on a square input)."""
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
        out = torch.empty(cols, device=x.device, dtype=x.dtype)
        row_mean_kernel[(cols,)](x, out, rows, x.stride(1), x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return out
