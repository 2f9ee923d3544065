"""A right answer to a convolution + batch norm + ReLU region `bbagent regions` finds in resnet18
(a 3x3 convolution, stride 1, padding 1, no bias; the batch norm in inference: running mean and
variance, weight and bias): the convolution left to torch (cuDNN, as the default library policy
allows), the batch norm and ReLU in one Triton pass over its output."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def batch_norm_relu(y_ptr, mean_ptr, var_ptr, gamma_ptr, beta_ptr, out_ptr, n, channels, plane, eps,
                    BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    channel = (offsets // plane) % channels
    y = tl.load(y_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + channel, mask=inside, other=0.0).to(tl.float32)
    var = tl.load(var_ptr + channel, mask=inside, other=1.0).to(tl.float32)
    gamma = tl.load(gamma_ptr + channel, mask=inside, other=0.0).to(tl.float32)
    beta = tl.load(beta_ptr + channel, mask=inside, other=0.0).to(tl.float32)
    out = (y - mean) / tl.sqrt(var + eps) * gamma + beta
    tl.store(out_ptr + offsets, tl.where(out < 0.0, 0.0, out), mask=inside)  # NaN stays NaN, as in torch.relu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, mean, var, gamma, beta):
        y = torch.nn.functional.conv2d(x, weight, None, stride=1, padding=1).contiguous()
        out = torch.empty_like(y)
        n, channels, plane = y.numel(), y.shape[1], y.shape[2] * y.shape[3]
        batch_norm_relu[(triton.cdiv(n, 1024),)](y, mean, var, gamma, beta, out, n, channels, plane, 1e-05, BLOCK=1024)
        return out
