"""A wrong answer to level2/4_Gemm_Scale_BatchNorm under the 'gemm' policy: the scale in Triton, but the
batch statistics and the running statistics' update computed by torch (floating computation on the
problem's data, which stays compute however it is spelt); the counter as nn.BatchNorm1d keeps it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, scale_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * tl.load(scale_ptr + offsets % cols, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t()).contiguous()
        scaled = torch.empty_like(y)
        scale_kernel[(triton.cdiv(y.numel(), 256),)](y, self.scale, scaled, y.numel(), y.shape[1], BLOCK=256)
        self.bn.num_batches_tracked.add_(1)
        mean, var = scaled.mean(0), scaled.var(0, unbiased=False)
        self.bn.running_mean.mul_(1 - self.bn.momentum).add_(self.bn.momentum * mean)
        self.bn.running_var.mul_(1 - self.bn.momentum).add_(self.bn.momentum * scaled.var(0))
        return (scaled - mean) / torch.sqrt(var + self.bn.eps) * self.bn.weight + self.bn.bias
