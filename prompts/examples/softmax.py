"""aten._softmax.default: `dim` moved last and made contiguous, each program takes a block of
whole rows, float32 arithmetic (float64 for float64), the row maximum subtracted before exp."""
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


def kernel(self, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else self.dtype
    x = self.reshape(1, 1) if self.dim() == 0 else self.movedim(dim, -1).contiguous()
    length = x.shape[-1]
    if length > 16384:  # longer rows need a loop over chunks (online max and rescaled sum)
        raise NotImplementedError("rows longer than 16384")
    out = torch.empty(x.shape, dtype=out_dtype, device=self.device)
    rows = out.numel() // length if length else 0
    if rows:
        BLOCK = max(16, triton.next_power_of_2(length))
        ROWS = max(1, 4096 // BLOCK)
        acc = tl.float64 if self.dtype == torch.float64 else tl.float32
        _softmax_rows[(triton.cdiv(rows, ROWS),)](x, out, rows, length, ACC=acc, ROWS=ROWS, BLOCK=BLOCK)
    return out.reshape(()) if self.dim() == 0 else out.movedim(-1, dim)
