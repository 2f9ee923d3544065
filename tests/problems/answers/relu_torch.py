"""A wrong answer to level1/1_ReLU: PyTorch computes it, beside a Triton launch that does nothing."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offsets, mask=offsets < n)


class ModelNew(nn.Module):
    def forward(self, x):
        nothing_kernel[(1,)](x, x.numel(), BLOCK=1024)
        return torch.relu(x)
