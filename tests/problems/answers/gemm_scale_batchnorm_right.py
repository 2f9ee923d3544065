"""A right answer to level2/4_Gemm_Scale_BatchNorm: the matrix product left to torch (addmm), the
scale and the batch normalization in one Triton kernel per feature (batch statistics, the running
statistics updated in it), and the batch counter incremented as nn.BatchNorm1d does
(``num_batches_tracked.add_(1)``: the module's own bookkeeping, not the problem's computation)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_batchnorm_kernel(x_ptr, scale_ptr, weight_ptr, bias_ptr, mean_ptr, var_ptr, out_ptr, rows, cols,
                           eps, momentum, BLOCK_ROWS: tl.constexpr):
    col = tl.program_id(0)
    offsets = tl.arange(0, BLOCK_ROWS)
    mask = offsets < rows
    x = tl.load(x_ptr + offsets * cols + col, mask=mask, other=0.0) * tl.load(scale_ptr + col)
    mean = tl.sum(x, axis=0) / rows
    centred = tl.where(mask, x - mean, 0.0)
    squares = tl.sum(centred * centred, axis=0)
    y = centred / tl.sqrt(squares / rows + eps) * tl.load(weight_ptr + col) + tl.load(bias_ptr + col)
    tl.store(out_ptr + offsets * cols + col, y, mask=mask)
    running_mean = tl.load(mean_ptr + col)
    running_var = tl.load(var_ptr + col)
    tl.store(mean_ptr + col, (1 - momentum) * running_mean + momentum * mean)
    tl.store(var_ptr + col, (1 - momentum) * running_var + momentum * squares / (rows - 1))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t()).contiguous()
        rows, cols = y.shape
        out = torch.empty_like(y)
        bn = self.bn
        bn.num_batches_tracked.add_(1)
        scale_batchnorm_kernel[(cols,)](y, self.scale, bn.weight, bn.bias, bn.running_mean, bn.running_var, out,
                                        rows, cols, bn.eps, bn.momentum, BLOCK_ROWS=triton.next_power_of_2(rows))
        return out
