"""A correct aten.bitwise_and.Tensor: integer and bool inputs, broadcasting and promotion in the
wrapper (expanded, then made contiguous), the and computed in the result's integer type."""
import torch
import triton
import triton.language as tl


@triton.jit
def _and(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a & b, mask=mask)


def kernel(self, other):
    dtype = torch.result_type(self, other)
    shape = torch.broadcast_shapes(self.shape, other.shape)
    a = self.to(dtype).expand(shape).contiguous()
    b = other.to(dtype).expand(shape).contiguous()
    out = torch.empty(shape, dtype=dtype, device=self.device)
    n = out.numel()
    if n:
        _and[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
    return out
