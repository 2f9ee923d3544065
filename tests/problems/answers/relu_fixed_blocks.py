"""A wrong answer to level1/1_ReLU, right only at the problem's sizes: no mask, as many blocks of
512 as fit whole (16 x 512 values are 16 of them), so a tail of any other size is never written."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets), 0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(x.numel() // 512,)](x, out, BLOCK=512)
        return out
