"""Wrong on purpose for aten._softmax.default: exp(x) / sum(exp(x)) without subtracting the row max (overflows)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, out_ptr, rows, length, ACC: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (row[:, None] < rows) & (cols[None, :] < length)
    offsets = row[:, None] * length + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=float("-inf")).to(ACC)
    shifted = x
    e = tl.where(mask, tl.exp(shifted), 0.0)
    tl.store(out_ptr + offsets, (e / tl.sum(e, axis=1)[:, None]).to(out_ptr.dtype.element_ty), mask=mask)


def kernel(self, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else self.dtype
    x = self.reshape(1, 1) if self.dim() == 0 else self.movedim(dim, -1).contiguous()
    length = x.shape[-1]
    if length > 16384:
        raise ValueError("rows longer than 16384 are not handled by this kernel")
    out = torch.empty(x.shape, dtype=out_dtype, device=self.device)
    rows = out.numel() // length if length else 0
    if rows:
        block = max(16, triton.next_power_of_2(length))
        per_program = max(1, 4096 // block)
        acc = tl.float64 if self.dtype == torch.float64 else tl.float32
        _softmax_rows[(triton.cdiv(rows, per_program),)](x, out, rows, length, ACC=acc,
                                                         ROWS=per_program, BLOCK=block)
    return out.reshape(()) if self.dim() == 0 else out.movedim(-1, dim)
