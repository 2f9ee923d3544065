"""A right answer to the softmax region `bbagent regions` finds in the small transformer's
attention (max, exp, sum, divide over the last dimension; the model's scores hold -inf where the
causal mask hides a key), returned as (batch * heads, rows, columns): one Triton program per row."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, out_ptr, width, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK)
    inside = columns < width
    x = tl.load(x_ptr + row * width + columns, mask=inside, other=-float("inf")).to(tl.float32)
    shifted = x - tl.max(x, axis=0)
    numerator = tl.where(inside, tl.exp(shifted), 0.0)
    tl.store(out_ptr + row * width + columns, numerator / tl.sum(numerator, axis=0), mask=inside)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores):
        width = scores.shape[-1]
        rows = scores.contiguous().view(-1, width)
        out = torch.empty_like(rows)
        softmax_rows[(rows.shape[0],)](rows, out, width, BLOCK=triton.next_power_of_2(width))
        return out.view(-1, scores.shape[-2], width)
