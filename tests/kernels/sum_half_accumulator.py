"""Wrong on purpose for aten.sum.dim_IntList: accumulates float16 in float16 (rounding error grows with length)."""
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
        x = tl.load(x_ptr + row[:, None] * length + cols[None, :], mask=mask, other=0)
        acc += x.to(ACC)
    tl.store(out_ptr + row, tl.sum(acc, axis=1).to(out_ptr.dtype.element_ty), mask=row < rows)


_ACC = {torch.float16: tl.float16, torch.bfloat16: tl.float32, torch.float32: tl.float32,
        torch.float64: tl.float64}


def kernel(self, dim, keepdim=False, *, dtype=None):
    ndim = self.dim()
    dims = sorted({d % ndim for d in dim}) if dim and ndim else list(range(ndim))
    out_dtype = dtype or (torch.int64 if not self.dtype.is_floating_point else self.dtype)
    kept = [d for d in range(ndim) if d not in dims]
    kept_shape = [self.shape[d] for d in kept]
    rows = 1
    for size in kept_shape:
        rows *= size
    length = 1
    for d in dims:
        length *= self.shape[d]
    x = self.to(out_dtype) if dtype is not None else self
    x = x.permute(kept + dims).contiguous()
    out = torch.empty(kept_shape, dtype=out_dtype, device=self.device)
    if rows:
        block = min(1024, max(16, triton.next_power_of_2(length)))
        per_program = max(1, 4096 // block)
        _row_sum[(triton.cdiv(rows, per_program),)](x, out, rows, length, ACC=_ACC.get(out_dtype, tl.int64),
                                                    ROWS=per_program, BLOCK=block)
    if keepdim:
        out = out.reshape([1 if d in dims else self.shape[d] for d in range(ndim)])
    return out
