"""aten._softmax.default: the input seen as [outer, length, inner] around `dim` (contiguous, so no
copy for any dim), float32 arithmetic (float64 for float64), the maximum subtracted before exp.
Softmax over the last dim (inner == 1): each program takes a block of whole rows. Over another
dim: each program takes one outer index and a block of inner columns, and reduces down the columns,
so the reads along inner stay contiguous."""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, out_ptr, rows, length, ACC: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (row[:, None] < rows) & (cols[None, :] < length)
    offsets = row[:, None] * length + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=float("-inf")).to(ACC)  # masked lanes add exp(-inf) = 0
    e = tl.where(mask, tl.exp(x - tl.max(x, axis=1)[:, None]), 0.0)
    tl.store(out_ptr + offsets, (e / tl.sum(e, axis=1)[:, None]).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_columns(x_ptr, out_ptr, length, inner, ACC: tl.constexpr, BLOCK_L: tl.constexpr,
                     BLOCK_I: tl.constexpr):
    blocks = tl.cdiv(inner, BLOCK_I)  # one flat grid: its second axis would stop at 65535
    outer = tl.program_id(0).to(tl.int64) // blocks
    cols = (tl.program_id(0) % blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    steps = tl.arange(0, BLOCK_L)
    mask = (steps[:, None] < length) & (cols[None, :] < inner)
    offsets = outer * length * inner + steps[:, None] * inner + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=float("-inf")).to(ACC)
    e = tl.where(mask, tl.exp(x - tl.max(x, axis=0)[None, :]), 0.0)
    tl.store(out_ptr + offsets, (e / tl.sum(e, axis=0)[None, :]).to(out_ptr.dtype.element_ty), mask=mask)


def kernel(self, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else self.dtype
    x = self.contiguous()  # a no-op for contiguous inputs
    dim = dim % max(x.dim(), 1)
    length = x.shape[dim] if x.dim() else 1
    inner = math.prod(x.shape[dim + 1:])
    out = torch.empty(x.shape, dtype=out_dtype, device=self.device)
    if out.numel() == 0:
        return out
    BLOCK = max(16, triton.next_power_of_2(length))
    if BLOCK > 16384:  # longer rows need a loop over chunks (online max and rescaled sum)
        raise NotImplementedError("softmax over more than 16384 elements")
    acc = tl.float64 if self.dtype == torch.float64 else tl.float32
    if inner == 1:
        rows = out.numel() // length
        ROWS = max(1, 1024 // BLOCK)  # small programs, many of them: 1024 elements, 2 warps (more for long rows)
        _softmax_rows[(triton.cdiv(rows, ROWS),)](x, out, rows, length, ACC=acc, ROWS=ROWS, BLOCK=BLOCK,
                                                  num_warps=min(16, max(2, BLOCK // 1024)))
    else:
        BLOCK_I = max(1, min(triton.next_power_of_2(inner), 4096 // BLOCK))
        outer = out.numel() // (length * inner)
        _softmax_columns[(outer * triton.cdiv(inner, BLOCK_I),)](x, out, length, inner, ACC=acc, BLOCK_L=BLOCK,
                                                                 BLOCK_I=BLOCK_I)
    return out
