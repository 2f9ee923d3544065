"""Correct for aten.cumsum.default: running sums along ``dim``, one program per row, a carry
between blocks; integers and bool sum in int64 (aten's result type), floats in float32."""
import torch
import triton
import triton.language as tl


@triton.jit
def _cumsum_rows(x_ptr, out_ptr, length, IS_INT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * length
    if IS_INT:
        carry = tl.sum(tl.zeros([BLOCK], dtype=tl.int64), axis=0)
    else:
        carry = tl.sum(tl.zeros([BLOCK], dtype=tl.float32), axis=0)
    for start in range(0, length, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < length
        values = tl.load(x_ptr + base + offsets, mask=mask, other=0)
        if IS_INT:
            values = values.to(tl.int64)
        else:
            values = values.to(tl.float32)
        running = tl.cumsum(values, axis=0) + carry
        tl.store(out_ptr + base + offsets, running.to(out_ptr.dtype.element_ty), mask=mask)
        carry = carry + tl.sum(values, axis=0)


def kernel(self, dim, *, dtype=None):
    if dtype is None:
        dtype = torch.int64 if (self.dtype == torch.bool or not self.dtype.is_floating_point) else self.dtype
    if self.dim() == 0:
        moved = self.reshape(1, 1)
    else:
        moved = self.movedim(dim, -1)
    shape = moved.shape
    length = shape[-1] if len(shape) else 1
    rows = moved.numel() // length if length else 0
    source = moved.contiguous().reshape(rows, length)
    if dtype != self.dtype:
        source = source.to(dtype)
    result = torch.empty((rows, length), dtype=dtype, device=self.device)
    if rows and length:
        _cumsum_rows[(rows,)](source, result, length, IS_INT=not dtype.is_floating_point, BLOCK=128)
    if self.dim() == 0:
        return result.reshape(())
    return result.reshape(shape).movedim(-1, dim).contiguous()
