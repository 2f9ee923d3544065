"""A right answer to level2/3_Conv2d_ReLU_BiasAdd: the convolution in torch (cuDNN), the ReLU and
the per-channel bias in one Triton kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_channel_bias_kernel(x_ptr, bias_ptr, out_ptr, n, plane, channels, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    bias = tl.load(bias_ptr + (offsets // plane) % channels, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0) + bias, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias).contiguous()
        out = torch.empty_like(y)
        relu_channel_bias_kernel[(triton.cdiv(y.numel(), 256),)](y, self.bias, out, y.numel(), y.shape[2] * y.shape[3],
                                                                 y.shape[1], BLOCK=256)
        return out
