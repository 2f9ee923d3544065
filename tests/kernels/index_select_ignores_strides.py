"""Wrong on purpose for aten.index_select.default: indexes self's memory as if it were contiguous."""
import torch
import triton
import triton.language as tl

RANK = 4


@triton.jit
def _index_select(x_ptr, idx_ptr, out_ptr, n, idx_stride, DIM: tl.constexpr, s1, s2, s3,
                  x0, x1, x2, x3, BLOCK: tl.constexpr):
    linear = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = linear < n
    c3 = linear % s3
    rest = linear // s3
    c2 = rest % s2
    rest = rest // s2
    c1 = rest % s1
    c0 = rest // s1
    if DIM == 0:
        c0 = tl.load(idx_ptr + c0 * idx_stride, mask=mask, other=0).to(tl.int64)
    elif DIM == 1:
        c1 = tl.load(idx_ptr + c1 * idx_stride, mask=mask, other=0).to(tl.int64)
    elif DIM == 2:
        c2 = tl.load(idx_ptr + c2 * idx_stride, mask=mask, other=0).to(tl.int64)
    else:
        c3 = tl.load(idx_ptr + c3 * idx_stride, mask=mask, other=0).to(tl.int64)
    value = tl.load(x_ptr + c0 * x0 + c1 * x1 + c2 * x2 + c3 * x3, mask=mask)
    tl.store(out_ptr + linear, value, mask=mask)


def kernel(self, dim, index):
    if self.dim() > RANK:
        raise ValueError(f"up to {RANK} dimensions")
    x = self.reshape(1) if self.dim() == 0 else self
    dim = dim % x.dim()
    out_shape = list(x.shape)
    out_shape[dim] = index.numel()
    out = torch.empty(out_shape, dtype=self.dtype, device=self.device)
    n = out.numel()
    if n:
        pad = RANK - x.dim()
        sizes = [1] * pad + out_shape
        strides = [0] * pad + list(torch.empty(x.shape).stride())
        idx_stride = index.stride(0) if index.dim() else 0
        _index_select[(triton.cdiv(n, 1024),)](x, index, out, n, idx_stride, pad + dim, *sizes[1:], *strides,
                                               BLOCK=1024)
    return out.reshape(()) if self.dim() == 0 else out
