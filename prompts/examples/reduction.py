"""aten.sum.dim_IntList: reduced dimensions moved last and made contiguous ([rows, length]), each
program sums a block of rows in chunks; integers and bools accumulate in int64, float16/bfloat16
in float32. (For a leading-dimension reduction the copy costs a full pass: indexing the input
with its strides, a block of columns per program, avoids it.)"""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum(x_ptr, out_ptr, rows, length, ACC: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    acc = tl.zeros([ROWS, BLOCK], dtype=ACC)
    for start in range(0, length, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = (row[:, None] < rows) & (cols[None, :] < length)
        acc += tl.load(x_ptr + row[:, None] * length + cols[None, :], mask=mask, other=0).to(ACC)
    tl.store(out_ptr + row, tl.sum(acc, axis=1).to(out_ptr.dtype.element_ty), mask=row < rows)


def kernel(self, dim, keepdim=False, *, dtype=None):
    ndim = self.dim()
    dims = sorted({d % ndim for d in dim}) if dim and ndim else list(range(ndim))  # None or []: all
    out_dtype = dtype or (self.dtype if self.dtype.is_floating_point else torch.int64)
    kept = [d for d in range(ndim) if d not in dims]
    x = self.to(out_dtype) if dtype is not None else self  # dtype= casts before reducing
    x = x.permute(kept + dims).contiguous()
    out = torch.empty([self.shape[d] for d in kept], dtype=out_dtype, device=self.device)
    rows = out.numel()
    length = x.numel() // rows if rows else 0
    if rows:  # length 0 (an empty reduced dimension) sums to 0
        acc = {torch.float64: tl.float64}.get(out_dtype, tl.float32 if out_dtype.is_floating_point else tl.int64)
        BLOCK = min(1024, max(16, triton.next_power_of_2(length)))
        ROWS = max(1, 4096 // BLOCK)
        _row_sum[(triton.cdiv(rows, ROWS),)](x, out, rows, length, ACC=acc, ROWS=ROWS, BLOCK=BLOCK)
    if keepdim:
        out = out.reshape([1 if d in dims else self.shape[d] for d in range(ndim)])
    return out
