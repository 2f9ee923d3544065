"""aten.cumsum.default: `dim` moved last and made contiguous ([rows, length]), one program per
row scanning it in blocks with tl.cumsum and carrying the running total from block to block;
integers and bools sum in int64 (the result type aten gives them), floats in float32."""
import torch
import triton
import triton.language as tl


@triton.jit
def _cumsum_rows(x_ptr, out_ptr, length, ACC: tl.constexpr, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * length
    carry = tl.sum(tl.zeros([BLOCK], dtype=ACC), axis=0)  # a scalar 0 of the accumulator type
    for start in range(0, length, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < length
        values = tl.load(x_ptr + base + offsets, mask=mask, other=0).to(ACC)
        tl.store(out_ptr + base + offsets, (tl.cumsum(values, axis=0) + carry).to(out_ptr.dtype.element_ty),
                 mask=mask)
        carry += tl.sum(values, axis=0)


def kernel(self, dim, *, dtype=None):
    if dtype is None:
        dtype = self.dtype if self.dtype.is_floating_point else torch.int64
    moved = self.reshape(1, 1) if self.dim() == 0 else self.movedim(dim, -1)
    length = moved.shape[-1]
    x = moved.to(dtype).contiguous()  # dtype= casts before summing
    out = torch.empty(x.shape, dtype=dtype, device=self.device)
    rows = out.numel() // length if length else 0
    if rows:
        acc = tl.float64 if dtype == torch.float64 else (tl.float32 if dtype.is_floating_point else tl.int64)
        _cumsum_rows[(rows,)](x, out, length, ACC=acc, BLOCK=256)
    return out.reshape(()) if self.dim() == 0 else out.movedim(-1, dim)
