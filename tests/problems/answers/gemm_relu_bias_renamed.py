"""A wrong answer to level2/1_Gemm_ReLU_BiasAdd: right arithmetic, but its weights under other
names, so it cannot take the reference's state_dict."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(x_ptr, bias_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0) + tl.load(bias_ptr + offsets % cols, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.shift = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = torch.mm(x, self.weight.t()).contiguous()
        out = torch.empty_like(y)
        relu_bias_kernel[(triton.cdiv(y.numel(), 256),)](y, self.shift, out, y.numel(), y.shape[1], BLOCK=256)
        return out
