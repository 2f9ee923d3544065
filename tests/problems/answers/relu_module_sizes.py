"""A right answer to level1/1_ReLU that reads the problem's sizes from constants of its own module,
as answers that copy the problem's text do: at smaller sizes the copies change with the problem's."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

batch_size = 16
dim = 512


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty(batch_size, dim, dtype=x.dtype, device=x.device)
        relu_kernel[(triton.cdiv(batch_size * dim, 256),)](x.contiguous(), out, batch_size * dim, BLOCK=256)
        return out
