"""aten.sigmoid.default: one program per BLOCK elements in memory order, math in float32. A dense
input (contiguous, or channels-last) is read where it is and the output takes its layout, as aten's
does; any other layout is copied to contiguous first."""
import torch
import triton
import triton.language as tl


@triton.jit
def _sigmoid(x_ptr, out_ptr, n, IS_F64: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    x = x.to(tl.float64) if IS_F64 else x.to(tl.float32)  # tl.exp takes float32/float64 only
    y = 1.0 / (1.0 + tl.exp(-x))  # NaN stays NaN; exp overflow gives 0 as it should
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def kernel(self):
    dense = self.is_contiguous() or (self.dim() == 4 and self.is_contiguous(memory_format=torch.channels_last)) or (
        self.dim() == 5 and self.is_contiguous(memory_format=torch.channels_last_3d))
    x = self if dense else self.contiguous()  # flat offsets need memory with no gaps
    # the same strides as x (so offset i is the same element in both); integer and bool inputs give
    # the default float dtype, floating inputs keep theirs
    out = torch.empty_like(x, dtype=torch.result_type(x, 1.0))
    n = x.numel()
    if n:  # zero-size: nothing to launch
        BLOCK = 1024
        _sigmoid[(triton.cdiv(n, BLOCK),)](x, out, n, IS_F64=x.dtype == torch.float64, BLOCK=BLOCK)
    return out
