"""A right answer to the layer-norm region `bbagent regions` finds in the small transformer
(var_mean, the normalisation, the affine weight and bias, then a view as rows): one Triton program
per row, the row held in registers, statistics in float32."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_rows(x_ptr, weight_ptr, bias_ptr, out_ptr, width, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK)
    inside = columns < width
    x = tl.load(x_ptr + row * width + columns, mask=inside, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / width
    centred = tl.where(inside, x - mean, 0.0)
    variance = tl.sum(centred * centred, axis=0) / width
    scale = 1.0 / tl.sqrt(variance + eps)
    weight = tl.load(weight_ptr + columns, mask=inside, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + columns, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * width + columns, centred * scale * weight + bias, mask=inside)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, bias):
        width = x.shape[-1]
        rows = x.contiguous().view(-1, width)
        out = torch.empty_like(rows)
        layer_norm_rows[(rows.shape[0],)](rows, weight.contiguous(), bias.contiguous(), out, width, 1e-05,
                                          BLOCK=triton.next_power_of_2(width))
        return out
