"""An adversarial answer to level1/1_ReLU: it zeroes its input in place and returns zeros, hoping
the reference then computes zeros from the same tensor."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    zero = tl.zeros((BLOCK,), dtype=tl.float32)
    tl.store(x_ptr + offsets, zero, mask=mask)
    tl.store(out_ptr + offsets, zero, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        zero_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
