"""A right answer to level2/1_Gemm_ReLU_BiasAdd: the matrix product left to torch, the ReLU and the
bias in one Triton kernel."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(x_ptr, bias_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    bias = tl.load(bias_ptr + offsets % cols, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0) + bias, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t()).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        relu_bias_kernel[(triton.cdiv(n, 256),)](y, self.bias, out, n, y.shape[1], BLOCK=256)
        return out
